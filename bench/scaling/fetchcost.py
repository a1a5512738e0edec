"""What fetch.lua's checks cost each fetch: as shipped vs without its quiesce commands and without
its key-type checks.

fetch.lua gained two Redis commands for issue 11: `SISMEMBER <quiesced set> <processing list>`
(once per call that takes tasks: a quiesced worker takes nothing) and `HINCRBY <stats>
taken:<queue>` (once per queue a call takes from: the taken counters the arrival rates come
from), and for issue 29 a `TYPE` of each key it writes before the first write (stats hash,
processing list, each queue it takes from: lib/entry.lua `misfit`), so that no call can fail
half-way. This loads the variants of the script on a private redis-server (the source as shipped;
without the SISMEMBER line; without both lines) and measures the server-side time per call
(`INFO commandstats`, usec_per_call of EVALSHA: no client or network time, which matters on a
loaded machine), fetching one task per call with the previous one acked, as a worker slot does.
Variants are interleaved over rounds; the median and the minimum per variant are reported (on a
shared machine the minimum is the better estimate of the script's own cost). As the difference
is within the noise of a whole call, each added command is also timed alone: a script running it
`--loop` times (microseconds per command inside Lua, no per-call overhead).

    python bench/scaling/fetchcost.py [--calls 20000] [--rounds 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT)]

import redis  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue.wire import keys, scripts  # noqa: E402

QUIESCE_LINE = ("local taking = count > 0 and redis.call('SISMEMBER', quiesced, processing) == 0")
NO_QUIESCE_LINE = "local taking = count > 0"
CHECK_LINE = "local wrong = wrong_type(stats, 'hash')\n"
"""The first line of fetch.lua's key-type checks, which end at the first CHECKS_END."""
CHECKS_END = "if wrong then return wrong end\n"
TAKEN_LINE = ("if got > 0 then redis.call('HINCRBY', stats, 'taken:' .. keys[q], got) end")
SCHEMA = keys.KeySchema(prefix="tq:bench", queues=(keys.QueueRef(key="tasks"),),
                        dead_letter="tq:bench:dead")


def variants() -> dict[str, str]:
    """The script sources to compare; stops with a clear message when fetch.lua changed."""
    source = scripts.lua("fetch")
    for line in (QUIESCE_LINE, TAKEN_LINE, CHECK_LINE):
        if line not in source:
            raise SystemExit(f"fetch.lua no longer contains {line!r}; update "
                             "bench/scaling/fetchcost.py (QUIESCE_LINE / TAKEN_LINE / CHECK_LINE)")
    no_quiesce = source.replace(QUIESCE_LINE, NO_QUIESCE_LINE)
    start = source.index(CHECK_LINE)
    end = source.index(CHECKS_END, start) + len(CHECKS_END)
    unchecked = source[:start] + "local wrong = nil\n" + source[end:]
    return {"as shipped": source, "without the TYPE checks": unchecked,
            "without SISMEMBER": no_quiesce,
            "without SISMEMBER and HINCRBY taken": no_quiesce.replace(TAKEN_LINE, "")}


def per_call_usec(client: redis.Redis, source: str, calls: int) -> float:
    """Server microseconds per EVALSHA of `source`: `calls` fetches of one task each."""
    sha = hashlib.sha1(source.encode()).hexdigest()
    client.script_load(source)
    fetch_keys = scripts.fetch_keys(SCHEMA, "bench-worker")
    client.delete(*fetch_keys)
    client.lpush("tasks", *[f'{{"id":"{n}","enqueued_at":1}}' for n in range(calls)])
    client.config_resetstat()
    held: list[str] = []
    for _ in range(calls):
        held = client.evalsha(sha, len(fetch_keys), *fetch_keys, *scripts.fetch_args(
            SCHEMA, now_ms=None, count=1, hold=True, acks=held))
    stats = client.info("commandstats")["cmdstat_evalsha"]
    return float(stats["usec_per_call"])


LOOPS = {
    "TYPE of a key": "for i = 1, tonumber(ARGV[1]) do redis.call('TYPE', KEYS[3]) end",
    "SISMEMBER quiesced set": "for i = 1, tonumber(ARGV[1]) do "
                              "redis.call('SISMEMBER', KEYS[1], KEYS[2]) end",
    "HINCRBY stats taken:<queue>": "for i = 1, tonumber(ARGV[1]) do "
                                   "redis.call('HINCRBY', KEYS[3], 'taken:tasks', 1) end",
    "empty loop (baseline)": "for i = 1, tonumber(ARGV[1]) do end",
}


def per_command_usec(client: redis.Redis, body: str, loop: int) -> float:
    """Microseconds per iteration of `body` run `loop` times in one script."""
    client.config_resetstat()
    client.eval(body, 3, SCHEMA.quiesced, SCHEMA.processing("bench-worker"), SCHEMA.stats, loop)
    return float(client.info("commandstats")["cmdstat_eval"]["usec"]) / loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loop", type=int, default=200000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    sources = variants()
    samples: dict[str, list[float]] = {name: [] for name in sources}
    alone: dict[str, list[float]] = {name: [] for name in LOOPS}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            client = redis.Redis(port=server.port, decode_responses=True)
            for _ in range(args.rounds):
                for name, source in sources.items():
                    samples[name].append(per_call_usec(client, source, args.calls))
                for name, body in LOOPS.items():
                    alone[name].append(per_command_usec(client, body, args.loop))
        finally:
            server.stop()
    base = statistics.median(samples["as shipped"])
    result = {}
    low = min(samples["as shipped"])
    print(f"{'fetch.lua':<38} {'median us':>10} {'vs shipped':>10} {'min us':>8} "
          f"{'vs shipped':>10}")
    for name, values in samples.items():
        median, least = statistics.median(values), min(values)
        result[name] = {"median_usec_per_call": round(median, 3),
                        "min_usec_per_call": round(least, 3), "samples": values}
        print(f"{name:<38} {median:>10.2f} {median - base:>+10.2f} {least:>8.2f} "
              f"{least - low:>+10.2f}")
    print(f"\n{'one command inside Lua':<38} {'median us':>10} {'min us':>8}")
    for name, values in alone.items():
        result[name] = {"median_usec": round(statistics.median(values), 4),
                        "min_usec": round(min(values), 4)}
        print(f"{name:<38} {statistics.median(values):>10.3f} {min(values):>8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
