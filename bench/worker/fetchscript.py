"""Server time of one fetch.lua call, this checkout against another (before/after a change of
the script or of its arguments), on a private redis-server.

Each contender runs in a child process that imports `taskqueue` from its own checkout, loads that
checkout's fetch.lua and builds its KEYS and ARGV with that checkout's `fetch_keys` and
`fetch_args` (`wire.scripts`, or `queueops` in older checkouts; with no flow control set and no
cancel, as a worker that saw neither calls it where the checkout has the flags), then makes
`--calls` fetches as a worker's dispatcher does (the previous entries acked in the same call)
and reports the server's microseconds per EVALSHA (`INFO commandstats`, usec_per_call: no
client or network time, which matters on a loaded machine) of its fastest batch of calls.
Contenders alternate over `--rounds`; the median and the minimum per scenario are printed.

    python bench/worker/fetchscript.py --base-root /tmp/base [--calls 20000] [--rounds 7]

(`git archive <commit> | tar -x -C /tmp/base` makes a base checkout.)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

BATCHES = 20
"""A child times its calls in this many batches and reports the fastest batch (on a shared
machine the least disturbed batch is the best estimate of the script's own cost)."""
SCENARIOS = {
    "one list, 1 task per call": ([{"key": "tasks"}], 1),
    "one list, 8 tasks per call": ([{"key": "tasks"}], 8),
    "three queues with a starvation limit, 8 per call": (
        [{"key": "hi", "starvation_limit": 3}, {"key": "tasks"}, {"key": "low", "type": "zset"}],
        8),
}


def child(port: int, calls: int, scenario: str) -> float:
    """In the contender's interpreter: server usec per fetch.lua call for `scenario`."""
    import redis

    try:
        from taskqueue.redisio import queueops
        from taskqueue.wire import keys, scripts
    except ImportError:  # a checkout from before the wire/redisio packages (e.g. eeeb0f1)
        from taskqueue import keys, queueops  # type: ignore[no-redef]
        from taskqueue import scriptcalls as scripts  # type: ignore[no-redef]

    queues, per_call = SCENARIOS[scenario]
    schema = keys.KeySchema(prefix="tq:bench", dead_letter="tq:bench:dead",
                            queues=tuple(keys.QueueRef(**q) for q in queues))
    client = redis.Redis(port=port, decode_responses=True)
    client.flushall()
    source = (getattr(scripts, "lua", None) or keys.lua)("fetch")
    sha = client.script_load(source)
    # the call's builders moved from queueops to wire.scripts: each checkout has one of them
    fetch_keys_of = getattr(queueops, "fetch_keys", None) or scripts.fetch_keys
    fetch_args_of = getattr(queueops, "fetch_args", None) or scripts.fetch_args
    fetch_keys = fetch_keys_of(schema, "bench-worker")
    # as a worker that saw no flow hash and no cancel calls it (where the checkout has the flags)
    params = inspect.signature(fetch_args_of).parameters
    flag = {name: False for name in ("flow", "cancels") if name in params}
    for q in schema.queues:
        payloads = [f'{{"id":"{n}","enqueued_at":1}}' for n in range(calls * per_call)]
        if q.type == "zset":
            client.zadd(q.key, {p: 1 for p in payloads})
        else:
            client.lpush(q.key, *payloads)
    held: list[str] = []
    batches = []
    for _ in range(BATCHES):
        client.config_resetstat()
        for _ in range(calls // BATCHES):
            held = client.evalsha(sha, len(fetch_keys), *fetch_keys, *fetch_args_of(
                schema, now_ms=None, count=per_call, hold=True, acks=held, **flag))
        batches.append(float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]))
    return min(batches)


def run_child(root: Path, port: int, calls: int, scenario: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "operator"), str(root)])}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(port),
                          "--calls", str(calls), "--scenario", scenario],
                         env=env, cwd=root, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-root", type=Path, help="the other checkout (required)")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--child", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(child(args.child, args.calls, args.scenario))
        return 0
    if args.base_root is None:
        parser.error("--base-root is required")
    sys.path[:0] = [str(ROOT)]
    from tests.fixtures.redis_server import RedisServer

    contenders = {"base": args.base_root.resolve(), "this": ROOT}
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            for _ in range(args.rounds):
                for scenario in SCENARIOS:
                    for name, root in contenders.items():
                        samples.setdefault((scenario, name), []).append(
                            run_child(root, server.port, args.calls, scenario))
        finally:
            server.stop()
    print(f"{'scenario':<50} {'contender':<6} {'median us':>10} {'min us':>8}")
    for (scenario, name), values in samples.items():
        print(f"{scenario:<50} {name:<6} {statistics.median(values):>10.2f} "
              f"{min(values):>8.2f}")
    print(json.dumps({f"{s} / {n}": v for (s, n), v in samples.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
