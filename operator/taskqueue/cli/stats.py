"""`taskqueue stats`: backlog, in-flight, delayed, dead letters, oldest task, workers, throughput,
and per queue the p95 wait of the tasks the workers measured (their wait histograms in the stats
hash: every task with an envelope time since the hash began).

One `queueops.observe` (a single EVALSHA) per sample. Throughput is the rise of the `completed`
counter of `<prefix>:stats` between samples: a one-shot `stats` takes two samples `--interval`
seconds apart; `--watch` keeps sampling and reports the rate over the last minute (or since it
started, when that is shorter). `--interval 0` skips the rate. Once `--watch` has read Redis, a
connection error or timeout does not end it: the refresh shows the error (and the last numbers)
and it goes on sampling until Redis answers again (each sample is sent once: the next refresh
is the retry).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from taskqueue import client as producer
from taskqueue.api import redact
from taskqueue.api.limits import Bounds
from taskqueue.cli import numbers, ui
from taskqueue.cli.errors import EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.target import Target, target_options
from taskqueue.redisio import flowops, queueops
from taskqueue.scaling import waits
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys
from taskqueue.wire.flow import QueueFlow

WINDOW_SECONDS = 60.0
CLEAR = "\x1b[H\x1b[2J"
INTERVAL = Bounds(0, 3600, "seconds from 0 to 3600 (> 0 with --watch)")
ITERATIONS = Bounds(1, math.inf, "a whole number >= 1", whole=True)
SAMPLE_TIMEOUT = 30.0
"""Seconds one sample may wait for Redis (the client has no socket timeout of its own:
`Target.connect_async`)."""


@dataclass(frozen=True)
class Sample:
    at: float
    completed: int


def throughput(samples: deque[Sample] | list[Sample]) -> tuple[float | None, float]:
    """(tasks per second, window seconds) between the first and the last sample."""
    if len(samples) < 2 or samples[-1].at <= samples[0].at:
        return None, 0.0
    window = samples[-1].at - samples[0].at
    return max(0, samples[-1].completed - samples[0].completed) / window, window


def _age(at: float, enqueued_at: float | None) -> float | None:
    # an envelope recovered from a raw payload carries enqueued_at 0: its age is unknown
    if enqueued_at is None or enqueued_at <= 0:
        return None
    return round(max(0.0, at - enqueued_at), 3)


def _p95(counts: tuple[int, ...]) -> float | None:
    p95 = waits.wait_quantile_of(counts, 0.95)
    return None if p95 is None else round(p95, 3)


def snapshot(name: str, schema: keys.KeySchema, obs: QueueObservation,
             rate: tuple[float | None, float],
             flows: tuple[QueueFlow, ...] = ()) -> dict[str, Any]:
    """The JSON document of `stats --json` (and what the text view shows)."""
    by_key = {f.key: f for f in flows}
    queues: list[dict[str, Any]] = [
        {"key": q.key, "type": q.type, "backlog": obs.backlog.get(q.key, 0),
         "oldest_task_age_seconds": _age(obs.at, obs.oldest_enqueued_at.get(q.key)),
         "wait_p95_seconds": _p95(obs.waited.get(q.key, ())),
         "limited_total": obs.limited.get(q.key, 0),
         "flow": _flow(by_key.get(q.key))}
        for q in schema.queues
    ]
    ages = [q["oldest_task_age_seconds"] for q in queues if q["oldest_task_age_seconds"]]
    per_second, window = rate
    return {
        "taskqueue": name,
        "at": round(obs.at, 3),
        "queues": queues,
        "backlog": obs.queued,
        "in_flight": obs.in_flight,
        "delayed": obs.delayed,
        "next_due_in_seconds": None if obs.next_due_at is None else round(
            obs.next_due_at - obs.at, 3),
        "dead_letter": obs.dead_letter,
        "dead_letter_trimmed_total": obs.dead_letter_trimmed_total,
        "oldest_task_age_seconds": max(ages) if ages else None,
        "workers": {"alive": obs.live_workers, "registered": len(obs.workers),
                    "busy": obs.busy_workers},
        "completed_total": obs.completed_total,
        "failed_total": obs.failed_total,
        "duplicates_skipped_total": obs.duplicates_total,
        "cancelled_total": obs.cancelled_total,
        "throughput_per_second": None if per_second is None else round(per_second, 3),
        "throughput_window_seconds": round(window, 1),
    }


def _flow(q: QueueFlow | None) -> dict[str, Any] | None:
    """A queue's limits and pause for `stats --json` (None when it has none)."""
    if q is None or not q.limited:
        return None
    return {"paused": q.is_paused, "paused_by_spec": q.paused, "paused_by_cli": q.paused_cli,
            "rate_per_second": q.per_second, "burst": None if q.rate is None else q.rate[2],
            "max_in_flight": q.max_in_flight, "in_flight": q.held}


def _flow_text(flow: dict[str, Any] | None, limited: int) -> str:
    """'paused', '7/10 in flight', '50/s', then '1200 held back' (the tasks a limit or pause
    held back from fetches, ever: stats `limited:<queue>`); '-' for a queue with none of them."""
    parts = []
    if flow is not None:
        parts = ["paused"] if flow["paused"] else []
        if flow["max_in_flight"] is not None:
            parts.append(f"{flow['in_flight'] or 0}/{flow['max_in_flight']} in flight")
        if flow["rate_per_second"] is not None:
            parts.append(f"{flow['rate_per_second']:g}/s")
    if limited:
        parts.append(f"{limited} held back")
    return ", ".join(parts) or "-"


def _delayed(snap: dict[str, Any]) -> str:
    """'3 (retries + scheduled), next due in 12s'."""
    text = f"{snap['delayed']} (retries + scheduled)"
    nxt = snap["next_due_in_seconds"]
    if nxt is not None:
        text += f", next due {'now' if nxt <= 0 else 'in ' + ui.duration(nxt)}"
    return text


def _dead(snap: dict[str, Any]) -> str:
    """'12', or '12 (5 older dropped by retry.deadLetterMaxLength)'."""
    text = str(snap["dead_letter"])
    if snap["dead_letter_trimmed_total"]:
        text += (f" ({snap['dead_letter_trimmed_total']} older dropped by "
                 "retry.deadLetterMaxLength)")
    return text


def _wait(seconds: float | None) -> str:
    """A wait to a tenth of a second under a minute (targets are set in seconds)."""
    if seconds is None or seconds >= 60:
        return ui.duration(seconds)
    return f"{seconds:.1f}s"


def render(snap: dict[str, Any]) -> str:
    """The text view: one row per queue, then the TaskQueue's totals."""
    rows = [[q["key"], q["type"], str(q["backlog"]), ui.duration(q["oldest_task_age_seconds"]),
             _wait(q["wait_p95_seconds"]), _flow_text(q["flow"], q["limited_total"])]
            for q in snap["queues"]]
    w = snap["workers"]
    rate = snap["throughput_per_second"]
    rate_text = "-" if rate is None else (
        f"{rate:.2f}/s ({rate * 60:.0f}/min, over {snap['throughput_window_seconds']:.0f}s)"
    )
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap["at"]))
    totals = [
        ("backlog", str(snap["backlog"])),
        ("in flight", str(snap["in_flight"])),
        ("delayed", _delayed(snap)),
        ("dead letters", _dead(snap)),
        ("oldest task", ui.duration(snap["oldest_task_age_seconds"])),
        ("workers", f"{w['alive']} alive, {w['busy']} busy, {w['registered']} registered"),
        ("completed", f"{snap['completed_total']} (failed attempts {snap['failed_total']}, "
                      f"duplicates skipped {snap['duplicates_skipped_total']}, "
                      f"cancelled {snap['cancelled_total']})"),
        ("throughput", rate_text),
    ]
    return "\n".join([
        f"TaskQueue {snap['taskqueue']}   {stamp}",
        "",
        ui.table(["QUEUE", "TYPE", "BACKLOG", "OLDEST", "P95 WAIT", "FLOW"], rows),
        "",
        *(f"{label:<16} {value}" for label, value in totals),
    ])


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("stats", parents=target_options(), help=help,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON document (per refresh)")
    p.add_argument("-w", "--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=numbers.number(INTERVAL), default=None,
                   help="seconds between samples (default 1; 2 with --watch)")
    p.add_argument("--iterations", type=numbers.whole(ITERATIONS), default=None,
                   help="with --watch: stop after this many refreshes (for scripts and tests)")
    p.set_defaults(run=run)


def run(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("stats")
    interval = args.interval if args.interval is not None else (2.0 if args.watch else 1.0)
    if interval < 0 or (args.watch and interval <= 0):
        raise CliError("--interval must be > 0 with --watch and >= 0 otherwise", EXIT_USAGE)
    coro = _watch(target, schema, args, interval) if args.watch else _once(
        target, schema, args, interval)
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        if args.watch:
            sys.stdout.write("\n")
            return 0
        raise


def _client(target: Target, *, watch: bool = False) -> aioredis.Redis:
    """The client of the samples. `--watch` sends each sample once: the next refresh is its
    retry, and the refresh shows at once that Redis cannot be read."""
    return target.connect_async(**(producer.sent_once({}, asyncio=True) if watch else {}))


async def _observe(client: aioredis.Redis, schema: keys.KeySchema) -> QueueObservation:
    """One sample, within SAMPLE_TIMEOUT (a Ctrl-C cancels it at once); a CliError naming the
    first key that holds another type than its own."""
    try:
        async with asyncio.timeout(SAMPLE_TIMEOUT):
            obs = await queueops.observe(client, schema)
    except TimeoutError:
        raise RedisTimeoutError(f"no reply within {SAMPLE_TIMEOUT:g}s") from None
    if obs.wrong_types:
        first = obs.wrong_types[0]
        raise wrong_type(first.key, first.held, first.expected)
    return obs


async def _once(target: Target, schema: keys.KeySchema, args: argparse.Namespace,
                interval: float) -> int:
    client = _client(target)
    try:
        obs = await _observe(client, schema)
        samples = [Sample(obs.at, obs.completed_total)]
        if interval > 0:
            await asyncio.sleep(interval)
            obs = await _observe(client, schema)
            samples.append(Sample(obs.at, obs.completed_total))
        flows = await flowops.read_async(client, schema)
    finally:
        await client.aclose()
    snap = snapshot(target.name, schema, obs, throughput(samples), flows)
    print(json.dumps(snap) if args.json else render(snap))
    return 0


BLIP_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)
"""Errors `--watch` rides out once it has read Redis (a restart, a failover, a network blip)."""


async def _watch(target: Target, schema: keys.KeySchema, args: argparse.Namespace,
                 interval: float) -> int:
    client = _client(target, watch=True)
    samples: deque[Sample] = deque()
    last: dict[str, Any] | None = None
    down_since: float | None = None
    done = 0
    try:
        while args.iterations is None or done < args.iterations:
            if done:
                await asyncio.sleep(interval)
            done += 1
            try:
                obs = await _observe(client, schema)
                flows = await flowops.read_async(client, schema)
            except BLIP_ERRORS as exc:
                if last is None:
                    raise  # never read: a wrong URL is reported, not watched
                down_since = down_since or time.time()
                _show_error(target, args, interval, last, down_since, exc)
                continue
            down_since = None
            samples.append(Sample(obs.at, obs.completed_total))
            while samples[-1].at - samples[0].at > WINDOW_SECONDS:
                samples.popleft()
            last = snapshot(target.name, schema, obs, throughput(samples), flows)
            if args.json:
                print(json.dumps(last), flush=True)
            else:
                footer = f"\n\nrefreshing every {interval:g}s — Ctrl-C to quit"
                sys.stdout.write(CLEAR + render(last) + footer + "\n")
                sys.stdout.flush()
    finally:
        await client.aclose()
    return 0


def _show_error(target: Target, args: argparse.Namespace, interval: float,
                last: dict[str, Any], down_since: float, exc: BaseException) -> None:
    """One refresh while Redis cannot be read: the error, and the last numbers read."""
    now = time.time()
    error = f"{type(exc).__name__}: {redact.scrub(str(exc))}"
    if args.json:
        print(json.dumps({"taskqueue": target.name, "at": round(now, 3), "error": error,
                          "unreachable_seconds": round(now - down_since, 1)}), flush=True)
        return
    stamp = time.strftime("%H:%M:%S", time.localtime(last["at"]))
    sys.stdout.write(
        CLEAR + f"Redis at {redact.url(target.redis_url)} cannot be read for "
        f"{now - down_since:.0f}s: {error}\nretrying every {interval:g}s; the numbers below "
        f"are from {stamp}\n\n" + render(last) + "\n")
    sys.stdout.flush()
