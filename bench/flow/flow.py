"""Flow-control benchmarks (issue 32) on a private redis-server and real worker processes.

    python bench/flow/flow.py accuracy [--seconds 60] [--rate 200] [--burst 20]
    python bench/flow/flow.py inflight [--kills 20]
    python bench/flow/flow.py nocost [--calls 20000] [--rounds 5] [--flagged C] [--shipped C]
                                     [--base C]
    python bench/flow/flow.py scaling [--seeds 3] [--seconds 600] [--expected]

accuracy: 3 worker processes x concurrency 8 against one queue limited to --rate tasks/s (burst
--burst), a backlog that never runs dry, short tasks (the handler records its start time): the
achieved rate over --seconds after a 5 s warm-up, and the most starts in any 1 s window.
inflight: maxInFlight 10 with 3 x 8 slots, tasks of 20 ms, heartbeat 1 s (dead after 3 s); a
sampler reads the count and the truth (the entries in every processing list) atomically every
10 ms; a worker holding tasks (whichever does at that moment) is SIGKILLed and replaced --kills
times. Reports the most in flight seen, whether the count ever differed from the truth, and
how long after each kill the dead worker's tasks were back (the count then matches the live
workers' holdings).
nocost: server-side microseconds per fetch.lua call (INFO commandstats), one task per call with
the previous one acked, no flow control set, each script called with its own layout: this tree
(one EXISTS of both flow hashes and the cancels zset in every fetch), --flagged (the worker's
flag told fetch.lua whether to look at the flow hashes, here flag 0: it saw none; then the
cancels check was a TYPE and a ZCARD), --shipped (the flow-control commit: an EXISTS of both
hashes in every fetch) and --base (before flow control), interleaved over rounds, median and
minimum.
scaling: `taskqueue simulate`'s world (simulate.run, the real policy; no Redis) on steady
arrivals 3x a queue's rate limit, for a few limits, service times and concurrencies: the
operator's mean replicas (over the run, and after the first 120 s) against the limit's need
(rate x service time / concurrency pods), the tasks it started per second after 120 s against
the limit (a fleet held too small would fall behind it) and in the first 120 s (the first
pods are up 7.5 s in, so below the limit then: the start-up's cost), and the KEDA models'
(default and tuned) mean and most replicas, per seed; --expected: with
scaling.expectedServiceSeconds set to the true service time (else the cap holds the fleet
until a task has run, then sizes it with the lower bound the slots give until the workers
report the service time).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT)]

import redis  # noqa: E402
from bench.flow.handlers import STARTS  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue import client as producer  # noqa: E402
from taskqueue.wire import flow, keys, scripts  # noqa: E402

SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef(key="q"),), dead_letter="q:dead")
SNAPSHOT = """
local truth = 0
for _, list in ipairs(redis.call('KEYS', 'q:processing:*')) do
  truth = truth + redis.call('LLEN', list)
end
return {truth, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')}
"""


def worker(url: str, wid: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'operator'}", "BENCH_REDIS_URL": url,
           "TASKQUEUE_TEST_REDIS_URL": url}
    for name in ("TASKQUEUE_MANIFEST", "TASKQUEUE_WORKER_SETTINGS"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "taskqueue.worker.main", "--redis-url", url,
                             "--queue", "q", "--worker-id", wid, "--log-level", "WARNING",
                             *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def accuracy(server: RedisServer, args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(server.url, decode_responses=True)
    r.hset(SCHEMA.flow, flow.RATE + "q", flow.rate_text(args.rate, 1.0, args.burst))
    total = int(args.rate * (args.seconds + 15))
    for i in range(0, total, 5000):
        producer.enqueue_many_sync(r, "q", [str(j) for j in range(i, min(total, i + 5000))])
    procs = [worker(server.url, f"w{i}", "--handler", "bench.flow.handlers:start",
                    "--concurrency", "8") for i in range(3)]
    try:
        while r.llen(STARTS) == 0:
            time.sleep(0.05)
        time.sleep(args.seconds + 6)
    finally:
        stop(procs)
    starts = sorted(float(x) for x in r.lrange(STARTS, 0, -1))
    t0 = starts[0] + 5
    inside = [t for t in starts if t0 <= t < t0 + args.seconds]
    achieved = len(inside) / args.seconds
    most, j = 0, 0
    for i, t in enumerate(starts):
        while starts[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    print(f"accuracy: limit {args.rate}/s burst {args.burst}: achieved {achieved:.2f}/s over "
          f"{args.seconds}s ({(achieved / args.rate - 1) * 100:+.2f} %); most starts in any 1 s "
          f"window {most} (limit + burst = {args.rate + args.burst})")


def holder(r: redis.Redis, procs: dict[str, subprocess.Popen[bytes]]) -> str:
    """The id of a live worker holding tasks (waits up to 60 s; else the first one)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        for wid in procs:
            if r.llen(SCHEMA.processing(wid)):
                return wid
        time.sleep(0.01)
    return next(iter(procs))


def inflight(server: RedisServer, args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(server.url, decode_responses=True)
    r.hset(SCHEMA.flow, flow.MAX + "q", "10")
    producer.enqueue_many_sync(r, "q", [f"{i}:0.02" for i in range(20000)])
    wargs = ("--handler", "tests.helpers.handlers:sleep_then_record", "--concurrency", "8",
             "--heartbeat", "1", "--max-attempts", "100")
    procs = {f"w{i}": worker(server.url, f"w{i}", *wargs) for i in range(3)}
    samples: list[tuple[int, int]] = []
    halt = threading.Event()
    sampler_r = redis.Redis.from_url(server.url, decode_responses=True)

    def sample() -> None:
        while not halt.wait(0.01):
            truth, held = sampler_r.eval(SNAPSHOT, 1, SCHEMA.flow_state, flow.HELD + "q")
            samples.append((int(truth), int(held)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    back: list[float] = []
    held_at_kill: list[int] = []
    try:
        spawned = 3
        for _ in range(args.kills):
            vid = holder(r, procs)  # whichever live worker holds tasks now
            victim = procs.pop(vid)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            held_at_kill.append(int(r.llen(SCHEMA.processing(vid))))
            killed_at = time.time()
            procs[f"w{spawned}"] = worker(server.url, f"w{spawned}", *wargs)
            spawned += 1
            while r.exists(SCHEMA.processing(vid)) and time.time() - killed_at < 30:
                time.sleep(0.01)
            back.append(time.time() - killed_at)
    finally:
        halt.set()
        thread.join()
        stop(list(procs.values()))
    differ = sum(1 for t, h in samples if t != h)
    print(f"inflight: {len(samples)} samples, most in flight {max(t for t, _ in samples)} "
          f"(limit 10), count != truth in {differ} samples; {args.kills} SIGKILLs of workers "
          f"holding {sum(held_at_kill)} tasks in all: the dead worker's tasks back after "
          f"median {statistics.median(back):.2f}s, max "
          f"{max(back):.2f}s (heartbeat timeout 3 s)")


def base_fetch(commit: str) -> str:
    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{commit}:operator/taskqueue/wire/lua/{path}"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return "".join(show(f"lib/{line.split(':', 1)[1].strip()}.lua")
                   if line.startswith("-- include:") else line
                   for line in show("fetch.lua").splitlines(keepends=True))


Call = Callable[[list[str]], list[Any]]
"""KEYS and ARGV of one fetch taking one task with `held` acked, for one layout."""


def now_call(held: list[str]) -> list[Any]:
    """This tree's layout."""
    fetch_keys = scripts.fetch_keys(SCHEMA, "w")
    return [len(fetch_keys), *fetch_keys, *scripts.fetch_args(
        SCHEMA, now_ms=None, count=1, hold=True, acks=held)]


def flagged_call(held: list[str]) -> list[Any]:
    """The layout with the worker's flag (ARGV[7]), flag 0: the worker saw no flow hash."""
    fetch_keys = scripts.fetch_keys(SCHEMA, "w")
    return [len(fetch_keys), *fetch_keys, *scripts.fetch_args(
        SCHEMA, now_ms=None, count=1, hold=True), "0", *held]


def flag_less_call(held: list[str]) -> list[Any]:
    """The layout before the flag (flow control shipped: an EXISTS of both hashes per fetch)."""
    fetch_keys = scripts.fetch_keys(SCHEMA, "w")
    return [len(fetch_keys), *fetch_keys, *scripts.fetch_args(
        SCHEMA, now_ms=None, count=1, hold=True)[:6], *held]


def pre_flow_call(held: list[str]) -> list[Any]:
    """The layout of the commit before flow control (and before the lifecycle keys): KEYS
    processing, delayed, starvation, stats, dead letter, quiesced, queues; ARGV max, now,
    count, hold, number of acks, acks, per queue type/limit/take."""
    fetch_keys = [SCHEMA.processing("w"), SCHEMA.delayed, SCHEMA.starvation, SCHEMA.stats,
                  SCHEMA.dead_letter, SCHEMA.quiesced, *SCHEMA.queue_keys]
    return [len(fetch_keys), *fetch_keys, 10000, "", 1, "1", len(held), *held,
            "list", "", "1"]


Figures = tuple[float, float, float]
"""(server µs per EVALSHA, Redis process CPU µs per call, commands run inside the script per
call)."""


def cpu_us(r: redis.Redis) -> float:
    info = r.info("cpu")
    return 1e6 * (float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))


def per_call(r: redis.Redis, source: str, call: Call, calls: int) -> Figures:
    """Over `calls` fetches of one task each (the previous acked): the server-side wall time
    per EVALSHA (INFO commandstats; on a loaded machine it includes time the server was not
    on a core), the CPU the Redis process used per call (INFO cpu: less sensitive to that)
    and the commands the script ran per call (exact). Every call must take its task (a wrong
    layout taking nothing would look cheap)."""
    sha = r.script_load(source)
    r.delete("q", SCHEMA.processing("w"))
    producer.enqueue_many_sync(r, "q", [str(i) for i in range(calls)])
    r.config_resetstat()
    cpu = cpu_us(r)
    held: list[str] = []
    for _ in range(calls):
        held = r.evalsha(sha, *call(held))
        assert len(held) == 1, held
    cpu = cpu_us(r) - cpu
    stats = r.info("commandstats")
    inner = sum(int(v["calls"]) for k, v in stats.items()
                if k not in ("cmdstat_evalsha", "cmdstat_info", "cmdstat_config"))
    return (float(stats["cmdstat_evalsha"]["usec_per_call"]), cpu / calls, inner / calls)


def nocost(server: RedisServer, args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(server.url, decode_responses=True)
    variants: dict[str, tuple[str, Call]] = {
        "this tree (one EXISTS of the optional keys)": (scripts.lua("fetch"), now_call),
        f"{args.flagged} (the worker's flag, 0)": (base_fetch(args.flagged), flagged_call),
        f"{args.shipped} (EXISTS in every fetch)": (base_fetch(args.shipped), flag_less_call),
        f"{args.base} (before flow control)": (base_fetch(args.base), pre_flow_call),
    }
    found: dict[str, list[Figures]] = {name: [] for name in variants}
    names = list(variants)
    for i in range(args.rounds):  # each round in another order: no variant always goes first
        for name in names[i % len(names):] + names[:i % len(names)]:
            source, call = variants[name]
            found[name].append(per_call(r, source, call, args.calls))
    shipped = found[names[2]]
    for name, figures in found.items():
        wall = [f[0] for f in figures]
        cpu = [f[1] for f in figures]
        wall_ratio = statistics.median(f[0] / s[0] for f, s in zip(figures, shipped, strict=True))
        cpu_ratio = statistics.median(f[1] / s[1] for f, s in zip(figures, shipped, strict=True))
        print(f"nocost: {name}: script wall median {statistics.median(wall):.2f} us/call (min "
              f"{min(wall):.2f}, per-round ratio to {args.shipped} {wall_ratio:.3f}); Redis CPU "
              f"median {statistics.median(cpu):.2f} us/call (min {min(cpu):.2f}, ratio "
              f"{cpu_ratio:.3f}); commands inside the script {figures[0][2]:.2f}/call "
              f"({args.rounds} rounds x {args.calls} calls)")


SCALING_CASES = ((10, 2.0, 4), (50, 0.4, 4), (100, 0.5, 8), (20, 1.0, 1))
"""(rate limit tasks/s, service seconds, concurrency) of the `scaling` runs."""


def started_rate(result: Any, arrivals: list[Any], start: float, end: float) -> float:
    """Tasks started per second in [start, end) (sampled at the timeline's points: those
    arrived minus the growth of the queue), to show the fleet keeps up with the limit."""
    points = [(t, queued) for t, _, queued in result.timeline if start <= t < end]
    (t0, q0), (t1, q1) = points[0], points[-1]
    arrived = sum(1 for a in arrivals if t0 < a.at <= t1)
    return float(arrived - (q1 - q0)) / (t1 - t0)


def scaling(args: argparse.Namespace) -> None:
    from taskqueue.api.models import TaskQueue
    from taskqueue.simulate import trace
    from taskqueue.simulate.run import simulate
    from taskqueue.simulate.scalers import KEDA_DEFAULTS, KEDA_TUNED, KedaScaler, OperatorScaler

    for rate, service, concurrency in SCALING_CASES:
        tq = TaskQueue.model_validate({"spec": {
            "redis": {"url": "redis://r:6379/0"},
            "queues": [{"key": "tasks", "rateLimit": {"tasks": rate}}],
            "worker": {"concurrency": concurrency},
            "scaling": {"maxReplicas": 60, "idleCooldownSeconds": 30,
                        "scaleDownStabilizationSeconds": 10,
                        **({"expectedServiceSeconds": {"tasks": service}}
                           if args.expected else {})}}})
        need = rate * service / concurrency
        for seed in range(1, args.seeds + 1):
            arrivals = trace.generate("steady", trace.Load(
                rate=3.0 * rate, service=service, duration=float(args.seconds), seed=seed))
            ours = simulate(tq, arrivals, OperatorScaler(tq))
            steady = ours.replicas_between(120, args.seconds)
            started = started_rate(ours, arrivals, 120, args.seconds)
            first = started_rate(ours, arrivals, 0, 120)
            kedas = [simulate(tq, arrivals, KedaScaler(tq, k)) for k in (KEDA_DEFAULTS,
                                                                         KEDA_TUNED)]
            keda_text = "; ".join(
                f"{k.scaler} mean {k.mean_replicas:.1f} (after 120 s "
                f"{k.replicas_between(120, args.seconds):.1f}), most {k.max_replicas}"
                for k in kedas)
            print(f"scaling: limit {rate}/s, service {service:g} s, c={concurrency}, need "
                  f"{need:.2f} pods, arrivals {3 * rate}/s, seed {seed}: operator mean "
                  f"{ours.mean_replicas:.2f} ({ours.mean_replicas / need:.2f}x need), after "
                  f"120 s {steady:.2f} ({steady / need:.2f}x), most {ours.max_replicas}, "
                  f"started after 120 s {started:.2f}/s ({started / rate:.3f} of the limit), "
                  f"in the first 120 s {first:.2f}/s; "
                  f"{keda_text} (maxReplicas 60)", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("accuracy")
    a.add_argument("--seconds", type=int, default=60)
    a.add_argument("--rate", type=int, default=200)
    a.add_argument("--burst", type=int, default=20)
    sub.add_parser("inflight").add_argument("--kills", type=int, default=20)
    n = sub.add_parser("nocost")
    n.add_argument("--calls", type=int, default=20000)
    n.add_argument("--rounds", type=int, default=5)
    n.add_argument("--base", default="245cba7")
    n.add_argument("--flagged", default="7c53815")
    n.add_argument("--shipped", default="20872fe")
    g = sub.add_parser("scaling")
    g.add_argument("--seeds", type=int, default=3)
    g.add_argument("--seconds", type=int, default=600)
    g.add_argument("--expected", action="store_true",
                   help="set scaling.expectedServiceSeconds to the true service time (the "
                        "policy knows it before the first task ends)")
    args = p.parse_args()
    if args.what == "scaling":
        scaling(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            {"accuracy": accuracy, "inflight": inflight, "nocost": nocost}[args.what](
                server, args)
        finally:
            server.stop()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
