"""`taskqueue simulate`: replay a trace against a TaskQueue manifest, beside KEDA models.

No Redis and no cluster: the manifest's scaling runs through the real `policy.decide` and the
operator's scale-in (`taskqueue.simulate`). Prints worker-seconds, mean/max replicas, p50/p95/p99
wait per queue, interrupted tasks, busy pods deleted, scale changes and the time back to zero.

`--from-history NAME` replays the TaskQueue's own traffic instead, as the operator kept it in
its Redis, against -f (the proposed manifest) beside the current one (`taskqueue.cli.replay`).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from taskqueue.api.limits import Bounds
from taskqueue.cli.errors import EXIT_TARGET, EXIT_USAGE, CliError
from taskqueue.cli.numbers import require
from taskqueue.simulate import trace

if TYPE_CHECKING:  # the models and the simulator load when a simulation runs
    from taskqueue.api.models import TaskQueue
    from taskqueue.simulate.run import Result, Scaler, Settings

RATE = Bounds(0, 1e6, "tasks per second > 0 and <= 1000000", above=True)
SERVICE = Bounds(0, 86400, "seconds > 0 and <= 86400", above=True)
DURATION = Bounds(0, 30 * 86400, "seconds > 0 and <= 2592000 (30 days)", above=True)
TICK = Bounds(0, 60, "seconds > 0 and <= 60", above=True)
STARTUP = Bounds(0, 3600, "seconds from 0 to 3600")
GRACE = Bounds(0, 86400, "seconds from 0 to 86400")
HISTORY = Bounds(0, float("inf"), "a whole number >= 0", whole=True)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("simulate", help=help, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="TaskQueue manifest")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="CSV", help="rows of enqueued_at,queue,service_seconds")
    src.add_argument("--generator", default="steady", choices=sorted(trace.GENERATORS),
                     help="built-in traffic (default: steady)")
    src.add_argument("--from-history", metavar="NAME", default=None,
                     help="the TaskQueue NAME's own traffic, from the history the operator "
                     "keeps in its Redis; -f is then the proposed manifest")
    p.add_argument("--rate", type=float, default=1.0, help="generator: tasks/s (default 1)")
    p.add_argument("--service", type=float, default=1.0,
                   help="generator: mean service seconds (default 1)")
    p.add_argument("--duration", type=float, default=3600.0, help="generator: seconds (3600)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", default=None, metavar="TIME",
                   help="spec.schedules: the wall-clock start of the run, ISO 8601 (default: "
                   "now); their tasks join the trace, fired ahead as the operator does")
    p.add_argument("--startup", type=float, default=None,
                   help="seconds from pod creation to a worker taking tasks (default 5: "
                        "taskqueue.simulate.world.POD_STARTUP_SECONDS)")
    p.add_argument("--startup-per-pod", type=float, default=0.0, metavar="SECONDS",
                   help="added to a pod's start-up for each other pod starting at the same "
                        "time (pods that share a small node; default 0)")
    p.add_argument("--api-delay", type=float, default=None, metavar="SECONDS",
                   help="from a poll's decision to the new pod object (default 0.1: "
                        "taskqueue.simulate.world.API_DELAY_SECONDS)")
    p.add_argument("--exit-delay", type=float, default=None, metavar="SECONDS",
                   help="from a drained pod's deletion to its exit, billed (default 1.8: "
                        "taskqueue.simulate.world.EXIT_SECONDS)")
    p.add_argument("--poll-phase", type=float, default=0.0, metavar="SECONDS",
                   help="the operator's first poll this long after the trace starts (default "
                        "0; a burst's wait moves with where it lands in the poll interval)")
    p.add_argument("--grace", type=float, default=None,
                   help="SIGTERM grace (default: the manifest's terminationGracePeriodSeconds)")
    p.add_argument("--dispatch", choices=["pack", "spread"], default="pack",
                   help="pack: busy pods fetch first (this worker); spread: random free slot")
    p.add_argument("--tick", type=float, default=0.1, help="time step (default 0.1 s)")
    p.add_argument("--history", type=int, default=None, metavar="N",
                   help="the TaskQueue ran N tasks per queue before (its workers' service "
                        "totals are known from the start); default 0: a new TaskQueue "
                        "(--from-history: 300)")
    p.add_argument("--compare", default="keda,keda-tuned",
                   help="comma list of keda, keda-tuned, no-quiesce; '' for none")
    p.add_argument("--plot", action="store_true", help="print replicas and backlog over time")
    p.add_argument("--timeline", metavar="CSV", help="write time,replicas,backlog per scaler")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    _history_arguments(p)
    p.set_defaults(run_standalone=run)


FROM_HISTORY = ("since", "current", "namespace", "kubeconfig", "context", "redis_url")
"""The options that belong to --from-history."""


def _history_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--from-history NAME (the TaskQueue's own traffic, from its Redis)")
    g.add_argument("--since", metavar="DURATION", default=None,
                   help="replay the last DURATION (30m, 6h, 1d or seconds; default: all the "
                   "history kept)")
    g.add_argument("--current", metavar="FILE", default=None,
                   help="the current manifest, instead of reading NAME from the cluster")
    g.add_argument("-n", "--namespace", default=None, help="namespace of NAME")
    g.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG)")
    g.add_argument("--context", default=None, help="kubeconfig context")
    g.add_argument("--redis-url", default=None, help="Redis URL; overrides the TaskQueue's")


def _check(args: argparse.Namespace) -> None:
    """CliError naming an option out of its range, or of --from-history given without it."""
    require("--tick", args.tick, TICK)
    if args.startup is not None:
        require("--startup", args.startup, STARTUP)
    require("--startup-per-pod", args.startup_per_pod, STARTUP)
    require("--poll-phase", args.poll_phase, STARTUP)
    for flag, value in (("--api-delay", args.api_delay), ("--exit-delay", args.exit_delay)):
        if value is not None:
            require(flag, value, STARTUP)
    if args.history is not None:
        require("--history", args.history, HISTORY)
    if args.grace is not None:
        require("--grace", args.grace, GRACE)
    given = [name for name in FROM_HISTORY if getattr(args, name) is not None]
    if given and not args.from_history:
        flag = "--" + given[0].replace("_", "-")
        raise CliError(f"{flag} belongs to --from-history NAME; add it or drop {flag}",
                       EXIT_USAGE)


def scalers(tq: TaskQueue, compare: str, *, poll_phase: float = 0.0,
            api_delay: float | None = None) -> list[Scaler]:
    from taskqueue.simulate.scalers import KEDA_DEFAULTS, KEDA_TUNED, KedaScaler, OperatorScaler
    from taskqueue.simulate.world import API_DELAY_SECONDS

    keda = {"keda": KEDA_DEFAULTS, "keda-tuned": KEDA_TUNED}
    delay = API_DELAY_SECONDS if api_delay is None else api_delay
    out: list[Scaler] = [OperatorScaler(tq, first_poll=poll_phase, api_delay=delay)]
    for name in filter(None, (c.strip() for c in compare.split(","))):
        if name == "no-quiesce":
            out.append(OperatorScaler(tq, quiesce=False, api_delay=delay))
        elif name in keda:
            out.append(KedaScaler(tq, keda[name]))
        else:
            raise CliError(f"--compare: unknown {name!r}; use keda, keda-tuned or no-quiesce",
                           EXIT_USAGE)
    return out


def load_trace(args: argparse.Namespace, tq: TaskQueue) -> list[trace.Arrival]:
    """The trace or the generator's arrivals, with the tasks of spec.schedules."""
    arrivals = _load(args, tq)
    if not tq.spec.schedules:
        return arrivals
    start = time.time() if args.start is None else _start(args.start)
    duration = arrivals[-1].at if arrivals else args.duration
    return trace.merge(arrivals, trace.scheduled(tq.spec.schedules, start=start,
                                                 duration=duration, service=args.service,
                                                 seed=args.seed))


def _start(text: str) -> float:
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--start {text!r}: not an ISO 8601 time (e.g. 2026-03-29T00:00:00Z)",
                       EXIT_USAGE) from None
    return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp()


def _load(args: argparse.Namespace, tq: TaskQueue) -> list[trace.Arrival]:
    if args.trace:
        return trace.read_csv(Path(args.trace))
    require("--rate", args.rate, RATE)
    require("--service", args.service, SERVICE)
    require("--duration", args.duration, DURATION)
    keys = [q.key for q in tq.spec.queues]
    arrivals = trace.generate(args.generator, trace.Load(
        rate=args.rate, service=args.service, duration=args.duration, seed=args.seed,
        queue=keys[0]))
    if args.generator == "two-priority":
        if len(keys) < 2:
            raise CliError("--generator two-priority needs two queues in spec.queues "
                           "(the first is the high one)", EXIT_TARGET)
        rename = {trace.HIGH: keys[0], trace.LOW: keys[1]}
        arrivals = [trace.Arrival(a.at, rename[a.queue], a.service) for a in arrivals]
    return arrivals


def run_settings(args: argparse.Namespace, make: type[Settings], *, history: int) -> Settings:
    """The run's settings from the flags `_check` passed (the world's measured start-up unless
    --startup)."""
    settings = make(tick=args.tick, grace=args.grace, dispatch=args.dispatch, seed=args.seed,
                    history=history, startup_per_pod=args.startup_per_pod)
    if args.exit_delay is not None:
        settings = replace(settings, exit_delay=args.exit_delay)
    return settings if args.startup is None else replace(settings, startup=args.startup)


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.from_history:
        from taskqueue.cli import replay

        return replay.run(args)
    from taskqueue.api import manifest
    from taskqueue.simulate import report
    from taskqueue.simulate.run import Settings, simulate

    try:
        tq = manifest.load(args.file)
        arrivals = load_trace(args, tq)
    except manifest.ManifestError as exc:
        raise CliError(f"bad manifest: {exc}", EXIT_TARGET) from None
    except trace.TraceError as exc:
        raise CliError(str(exc), EXIT_TARGET) from None
    except OSError as exc:
        raise CliError(f"cannot read: {exc}", EXIT_TARGET) from None
    settings = run_settings(args, Settings, history=args.history or 0)
    results: list[Result] = []
    for scaler in scalers(tq, args.compare, poll_phase=args.poll_phase,
                          api_delay=args.api_delay):
        try:
            results.append(simulate(tq, arrivals, scaler, settings))
        except ValueError as exc:
            raise CliError(str(exc), EXIT_TARGET) from None
    if args.timeline:
        Path(args.timeline).write_text(report.timeline_csv(results), "utf-8")
    if args.json:
        sys.stdout.write(report.to_json(results) + "\n")
        return 0
    counts = ", ".join(f"{q.key} {sum(a.queue == q.key for a in arrivals)}"
                       for q in tq.spec.queues)
    sys.stdout.write(f"{len(arrivals)} tasks over {arrivals[-1].at if arrivals else 0:.0f}s "
                     f"({counts}), concurrency {tq.spec.worker.concurrency}\n")
    sys.stdout.write(report.table(results) + "\n")
    if args.plot:
        sys.stdout.write(report.plot(results) + "\n")
    return 0
