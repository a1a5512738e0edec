"""`taskqueue simulate --from-history NAME -f proposed.yaml`: replay a TaskQueue's own traffic,
kept by the operator in its Redis (`<prefix>:history`, `taskqueue.wire.history`), against a
proposed manifest beside the current one and the KEDA models.

The current TaskQueue and its Redis are found as the other commands find them
(`taskqueue.cli.target`): the object NAME in the cluster through the kubeconfig (`-n`,
`--kubeconfig`, `--context`; the URL from `spec.redis`, its Secret when it has one), or a
manifest given with `--current FILE`; `--redis-url` overrides the URL (a port-forward). The
history is read in pages of XRANGE from the window's start (`--since`, by the Redis clock), the
point before it by one XREVRANGE; the trace is rebuilt from the points (`simulate.replay`) and
run through `simulate.run` once per scaler: the current manifest first (the baseline of the
cost ratios), then the proposed one, then the KEDA models (always these four: `--compare` and
the generator's options do not apply).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from taskqueue.api.limits import MAX_HISTORY_RETENTION_SECONDS
from taskqueue.cli import target
from taskqueue.cli.errors import EXIT_TARGET, EXIT_USAGE, CliError
from taskqueue.cli.simulate import run_settings
from taskqueue.simulate import replay, report
from taskqueue.simulate.run import Result, Settings, simulate
from taskqueue.simulate.scalers import KEDA_DEFAULTS, KEDA_TUNED, KedaScaler, OperatorScaler
from taskqueue.wire import history, keys

if TYPE_CHECKING:
    from taskqueue.api.models import TaskQueue

PAGE = 2000
"""History points per XRANGE."""
KNOWN_ATTEMPTS = 300
"""Attempts per queue in the simulated stats hash at the start (the TaskQueue ran before: the
operator reads its service times at the first poll); `--history N` overrides it."""
@dataclass(frozen=True)
class Read:
    """What one read of the history returned."""

    points: list[history.HistoryPoint]
    before: history.HistoryPoint | None
    now_ms: int
    """Redis's clock when the read began."""
    malformed: int = 0


def since_seconds(text: str | None) -> float | None:
    """Seconds of `--since` (None: not given); CliError naming the option and the fix."""
    from taskqueue.cli import numbers

    if text is None:
        return None
    try:
        value = numbers.duration(text)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"--since: {exc}", EXIT_USAGE) from None
    if not 0 < value <= MAX_HISTORY_RETENTION_SECONDS:
        raise CliError(f"--since {text!r} is out of range; give a duration above 0 and at most "
                       f"{MAX_HISTORY_RETENTION_SECONDS // 86400:.0f}d (the longest history "
                       "kept)", EXIT_USAGE)
    return value


def read(client: redis.Redis, schema: keys.KeySchema, *, since: float | None) -> Read:
    """The history points of the window (all when `since` is None) and the one before it."""
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    start, before = "-", None
    malformed = 0
    if since is not None:
        start_ms = now_ms - round(since * 1000)
        start = f"{start_ms}-0"
        older = client.xrevrange(schema.history, max=f"({start}", min="-", count=1)
        decoded, malformed = _decode(older)
        before = decoded[0] if decoded else None
    points: list[history.HistoryPoint] = []
    while True:
        page: list[Any] = client.xrange(schema.history, min=start, max="+", count=PAGE) or []
        decoded, bad = _decode(page)
        points += decoded
        malformed += bad
        if len(page) < PAGE:
            return Read(points, before, now_ms, malformed)
        start = f"({page[-1][0]}"  # the client decodes replies: ids are str


def _decode(reply: Any) -> tuple[list[history.HistoryPoint], int]:
    """The points of an XRANGE reply and how many entries could not be read (skipped)."""
    out, bad = [], 0
    for _, raw in reply:
        try:
            out.append(history.HistoryPoint.decode(raw))
        except ValueError:
            bad += 1
    return out, bad


def run(args: argparse.Namespace) -> int:
    """The replay: resolve, read, rebuild, simulate, print."""
    from taskqueue.cli.main import redis_error

    since = since_seconds(args.since)
    current, where = _current(args)
    proposed = _proposed(args.file, current, where.name)
    schema = where.require_schema("simulate --from-history")
    try:
        client = where.connect()
        try:
            got = read(client, schema, since=since)
        finally:
            client.close()
    except redis.RedisError as exc:
        raise redis_error(exc, where) from None
    queues = [q.key for q in current.spec.queues]
    try:
        window = replay.select(got.points, before=got.before, now_ms=got.now_ms,
                               since_seconds=since, name=where.name)
        rebuilt = replay.rebuild(window, queues=queues, seed=args.seed)
    except replay.HistoryError as exc:
        raise CliError(str(exc), EXIT_TARGET) from None
    settings = run_settings(args, Settings,
                            history=KNOWN_ATTEMPTS if args.history is None else args.history)
    results = _simulate(current, proposed, rebuilt, settings)
    kept = replay.recorded(window, queues=queues)
    if args.timeline:
        Path(args.timeline).write_text(report.timeline_csv(results), "utf-8")
    if args.json:
        sys.stdout.write(json.dumps(as_dict(where.name, rebuilt, kept, results, got.malformed),
                                    indent=2) + "\n")
        return 0
    sys.stdout.write(header(where.name, rebuilt, kept, got.malformed) + "\n")
    sys.stdout.write(report.table(results) + "\n")
    sys.stdout.write(change(results[0], results[1]) + "\n")
    if args.plot:
        sys.stdout.write(report.plot(results) + "\n")
    return 0


def _current(args: argparse.Namespace) -> tuple[TaskQueue, target.Target]:
    """The TaskQueue as it runs (the cluster's object, or --current) and its target."""
    spec = argparse.Namespace(file=args.current, name=None if args.current else args.from_history,
                              namespace=args.namespace, kubeconfig=args.kubeconfig,
                              context=args.context, redis_url=args.redis_url)
    tq, where = target.resolve_object(spec)
    if args.current and tq.metadata.name != args.from_history:
        raise CliError(f"--current {args.current} is TaskQueue {tq.metadata.name!r}, not "
                       f"{args.from_history!r} (--from-history); give the manifest of "
                       f"{args.from_history!r}", EXIT_TARGET)
    return tq, where


def _proposed(path: str, current: TaskQueue, name: str) -> TaskQueue:
    """The proposed manifest; CliError when it is for another TaskQueue than `current`."""
    from taskqueue.api import manifest

    try:
        tq = manifest.load(path)
    except manifest.ManifestError as exc:
        raise CliError(f"bad manifest: {exc}", EXIT_TARGET) from None
    except OSError as exc:
        raise CliError(f"cannot read manifest: {exc}", EXIT_TARGET) from None
    ns, want = tq.metadata.namespace, current.metadata.namespace
    if tq.metadata.name != current.metadata.name or (ns and want and ns != want):
        got = f"{ns}/{tq.metadata.name}" if ns else tq.metadata.name
        raise CliError(f"-f {path} is TaskQueue {got!r}, not {name!r} (--from-history): a "
                       "proposed manifest replays the history of its own TaskQueue; set its "
                       "metadata.name (and namespace) to the TaskQueue's", EXIT_TARGET)
    return tq


def _simulate(current: TaskQueue, proposed: TaskQueue, rebuilt: replay.Rebuilt,
              settings: Settings) -> list[Result]:
    runs: list[tuple[str, TaskQueue, Any]] = [
        ("current", current, OperatorScaler(current)),
        ("proposed", proposed, OperatorScaler(proposed)),
        ("keda", current, KedaScaler(current, KEDA_DEFAULTS)),
        ("keda-tuned", current, KedaScaler(current, KEDA_TUNED)),
    ]
    results = []
    for name, tq, scaler in runs:
        scaler.name = name
        try:
            results.append(simulate(tq, rebuilt.arrivals, scaler, settings))
        except ValueError as exc:  # a queue of the history that the manifest does not declare
            raise CliError(f"{name} manifest: {exc}", EXIT_TARGET) from None
    return results


def header(name: str, rebuilt: replay.Rebuilt, kept: replay.Recorded, malformed: int) -> str:
    """What was replayed, and what the real fleet did over the same window."""
    start = datetime.fromtimestamp(rebuilt.start_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    end = datetime.fromtimestamp(rebuilt.end_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    counts = ", ".join(f"{q} {n}" for q, n in rebuilt.tasks.items())
    service = ", ".join(f"{q} {s:.3g}s" for q, s in rebuilt.service.items())
    lines = [f"history of {name}: {start} to {end} UTC ({rebuilt.seconds:.0f}s); "
             f"{len(rebuilt.arrivals)} tasks ({counts}); mean service {service or '-'}"]
    waits = ", ".join(f"{q} {w:.2f}s" for q, w in kept.worst_p95.items())
    lines.append(f"recorded: {kept.worker_seconds:.0f} worker-s (pods x interval), mean "
                 f"{kept.mean_replicas:.2f}, max {kept.max_replicas} replicas; worst interval "
                 f"p95 wait {waits or '-'}")
    notes = []
    if rebuilt.unknown_intervals:
        notes.append(f"{rebuilt.unknown_intervals} interval(s) without an arrival count (the "
                     "stats hash was reset): their attempts stand in")
    if rebuilt.no_squares:
        notes.append(f"no squared service times for {', '.join(rebuilt.no_squares)}: "
                     "exponential spread assumed")
    if malformed:
        notes.append(f"{malformed} history entr(y/ies) not readable, skipped")
    return "\n".join(lines + [f"note: {n}" for n in notes])


def change(base: Result, new: Result) -> str:
    """The proposed manifest's cost and p95 waits against the current one's."""
    delta = (new.worker_seconds / base.worker_seconds - 1) * 100 if base.worker_seconds else 0.0
    waits = "; ".join(f"{q} {base.waits[q][1]:.2f}s -> {new.waits[q][1]:.2f}s"
                      for q in base.waits if q in new.waits)
    return (f"proposed vs current: worker-seconds {base.worker_seconds:.0f} -> "
            f"{new.worker_seconds:.0f} ({delta:+.1f} %); p95 wait {waits or '-'}")


def as_dict(name: str, rebuilt: replay.Rebuilt, kept: replay.Recorded, results: list[Result],
            malformed: int) -> dict[str, Any]:
    base, new = results[0], results[1]
    return {
        "taskqueue": name,
        "window": {"start_ms": rebuilt.start_ms, "end_ms": rebuilt.end_ms,
                   "seconds": round(rebuilt.seconds, 3)},
        "tasks": rebuilt.tasks,
        "service_seconds": {q: round(s, 6) for q, s in rebuilt.service.items()},
        "unknown_intervals": rebuilt.unknown_intervals,
        "no_squares": list(rebuilt.no_squares),
        "malformed_entries": malformed,
        "recorded": {"worker_seconds": round(kept.worker_seconds, 1),
                     "mean_replicas": round(kept.mean_replicas, 3),
                     "max_replicas": kept.max_replicas,
                     "worst_interval_p95_seconds": kept.worst_p95},
        "results": [report.as_dict(r) for r in results],
        "change": {
            "worker_seconds": [round(base.worker_seconds, 1), round(new.worker_seconds, 1)],
            "p95_wait_seconds": {q: [round(base.waits[q][1], 3), round(new.waits[q][1], 3)]
                                 for q in base.waits if q in new.waits},
        },
    }
