"""Least-privilege Redis ACL rules for the worker, the operator, the CLI and the web console. Pure.

Each rule allows exactly the commands a component sends, directly or from inside its Lua scripts
(Redis checks every `redis.call` against the caller's ACL), on the TaskQueue's keys only. The
commands inside the scripts are read from the scripts themselves, so a script that starts using
a new command changes the rule with it; tests run each component under exactly its rule, and
without each single command of it.

    ACL SETUSER tq-worker on >PASSWORD resetkeys ~{emails}* resetchannels -@all +evalsha ...

`python -m taskqueue.redisio.acl worker '{emails}*'` prints the rule (docs/install.md).
"""

from __future__ import annotations

from typing import Literal

from taskqueue.wire import scripts

Component = Literal["worker", "operator", "cli", "console"]

SCRIPTS: dict[Component, tuple[str, ...]] = {
    # claim/complete/lease: idempotent consumption (spec.worker.idempotency)
    # cancelled: a running task stopped by a cancel
    "worker": ("fetch", "fail", "release", "heartbeat", "recover", "claim", "complete", "lease",
               "cancelled"),
    "operator": ("observe", "recover", "fire"),
    # enqueue: `taskqueue enqueue` with --in/--at/--unique-for/--id/--track
    "cli": ("observe", "status", "cancel", "enqueue"),
    "console": ("observe",),
}
"""The Lua scripts each component runs."""

DIRECT: dict[Component, tuple[str, ...]] = {
    # SCRIPT LOAD: after NOSCRIPT (restart/failover); LRANGE/LLEN/ZREM: held entries and leaving
    # the workers set; BRPOP/BZPOPMIN: AtMostOnce; CLIENT TRACKING: the idle wake-up; TYPE: the
    # startup key check (worker/wrongtype.py: wrong-type queue keys are skipped, named in the log);
    # ZRANGE: the promoter's look at the next due delayed task (worker/promoter.py);
    # SUBSCRIBE/ZRANGEBYSCORE: cancels (worker/lifecycle.py), HSET/HDEL/PEXPIRE: progress
    # (MULTI/EXEC: a report is written with its TTL in one transaction);
    # HGETALL: what flow control pauses, for the blocking pops (worker/flowwatch.py)
    "worker": ("evalsha", "script|load", "lrange", "llen", "zrem", "brpop", "bzpopmin",
               "client|tracking", "type", "zrange", "subscribe", "zrangebyscore", "hset",
               "hdel", "pexpire", "multi", "exec", "hgetall"),
    # PING: the connection pool's health check after 30 s idle; MULTI/SADD/SREM/LLEN/EXEC:
    # quiescing workers before scale-in (queueops.quiesce, one transaction); XADD: the history
    # and the decision log (queueops.observe_appending; MAXLEN ~ trims them, no XTRIM);
    # TYPE/HGETALL/HSET/HDEL: the spec's flow control written into <prefix>:flow (flowops.sync)
    "operator": ("evalsha", "script|load", "ping", "multi", "sadd", "srem", "llen", "exec",
                 "xadd", "type", "hgetall", "hset", "hdel"),
    # enqueue (lpush, zadd), dlq and drain (watched transactions; redis-py sends UNWATCH when
    # one fails), inflight (scan, zrange, type); stats' flow column (hgetall); pause (hsetnx)
    # and resume (hdel, hexists); simulate --from-history (TIME: the window by Redis's clock,
    # XRANGE/XREVRANGE: the history)
    "cli": ("evalsha", "script|load", "lpush", "zadd", "llen", "lrange", "ltrim", "lrem",
            "rpush", "zcard", "zrange", "zremrangebyrank", "unlink", "type", "scan", "watch",
            "multi", "exec", "unwatch", "hgetall", "hsetnx", "hdel", "hexists", "time",
            "xrange", "xrevrange"),
    # the web console (taskqueue console): the CLI's dlq code for its actions; reads of queues,
    # dead letters and held tasks (lrange, llen, zrange); XRANGE/XREVRANGE: the history and the
    # decision log; TYPE/HGETALL: the flow hashes (flowops.read_pipe) and the workers' progress
    # hashes; HMGET: the schedules' firing record; HSETNX/HDEL/HEXISTS: pause and resume
    # (flowops.pause, flowops.resume: taskqueue pause's field of the flow hash)
    "console": ("evalsha", "script|load", "llen", "lrange", "lrem", "rpush", "zadd", "zrange",
                "type", "watch", "multi", "exec", "unwatch", "xrange", "xrevrange", "hgetall",
                "hmget", "hsetnx", "hdel", "hexists"),
}
"""Commands each component sends itself (cluster clients add the commands below)."""

CLUSTER = ("cluster|slots", "cluster|shards", "cluster|nodes", "readonly", "asking", "command")
"""What a Redis Cluster client sends to learn and follow the topology."""

def script_commands(name: str) -> frozenset[str]:
    """The commands `taskqueue/wire/lua/<name>.lua` runs (with the library definitions it
    carries: `scripts.lua`), lower case."""
    return frozenset(c.lower() for c in scripts.LUA_CALL.findall(scripts.lua(name)))


def commands(component: Component, *, cluster: bool = False) -> tuple[str, ...]:
    """Every command `component` needs, sorted."""
    needed = set(DIRECT[component])
    for name in SCRIPTS[component]:
        needed |= script_commands(name)
    if cluster:
        needed |= set(CLUSTER)
    return tuple(sorted(needed))


def rule(component: Component, key_patterns: list[str], *, cluster: bool = False,
         without: str | None = None) -> str:
    """The ACL SETUSER rules (after the user name and password) for `component` on keys
    matching `key_patterns` (e.g. ["{emails}*"]); `without` drops one command (tests)."""
    allowed = [c for c in commands(component, cluster=cluster) if c != without]
    keys_part = " ".join(f"~{p}" for p in key_patterns)
    # the cancel channel `<prefix>:cancel` matches the key patterns (worker SUBSCRIBE, CLI
    # PUBLISH from cancel.lua); the operator uses no channel
    channels = "" if component == "operator" else " " + " ".join(f"&{p}" for p in key_patterns)
    return (f"resetkeys {keys_part} resetchannels{channels} -@all "
            + " ".join(f"+{c}" for c in allowed))


def main(argv: list[str] | None = None) -> int:
    """`python -m taskqueue.redisio.acl worker|operator|cli|console PATTERN... [--cluster]`:
    print the rule."""
    import sys
    args = list(sys.argv[1:] if argv is None else argv)
    cluster = "--cluster" in args
    args = [a for a in args if a != "--cluster"]
    if len(args) < 2 or args[0] not in SCRIPTS:
        print("usage: python -m taskqueue.redisio.acl worker|operator|cli|console "
              "KEY_PATTERN... [--cluster]", file=sys.stderr)
        return 2
    print(rule(args[0], args[1:], cluster=cluster))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
