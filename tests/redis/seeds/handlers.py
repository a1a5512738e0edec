"""Handlers of the seed tests: each applies an *effect* per task id (HINCRBY), so a test can
check that every id's effect happened exactly once."""

from __future__ import annotations

import os
import threading
import time

import redis

from taskqueue.worker.handlers import TaskContext
from tests.helpers.handlers import URL_ENV

CLIENT_NAME = "seeds-handler"
"""The handlers' connection name: the chaos test kills every other client connection."""
_clients: dict[str, redis.Redis] = {}


def client() -> redis.Redis:
    url = os.environ[URL_ENV]
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, decode_responses=True,
                                            client_name=CLIENT_NAME)
    return _clients[url]


EFFECTS = "seeds:effects"
"""hash: task id -> times its effect was applied."""
RUNNING = "seeds:running"
"""hash: task id -> "<pid> <thread id>" of the handler running it right now."""
OVERLAPS = "seeds:overlaps"
"""list: ids seen running twice at once."""
STARTED = "seeds:started"
"""list: "<pid> <unix time> <id>" pushed when a handler starts (the chaos test kills these)."""


def effect(payload: str, ctx: TaskContext) -> None:
    """Sleeps float(payload) seconds (default 0), then applies the effect of ctx.id once."""
    r = client()
    me = f"{os.getpid()} {threading.get_ident()}"
    if not r.hsetnx(RUNNING, ctx.id, me):
        other = str(r.hget(RUNNING, ctx.id) or "")
        if other and _alive(int(other.split()[0])):  # a SIGKILLed runner leaves its record
            r.rpush(OVERLAPS, ctx.id)
        r.hset(RUNNING, ctx.id, me)
    r.rpush(STARTED, f"{os.getpid()} {time.time():.6f} {ctx.id}")
    try:
        time.sleep(float(payload or 0))
    finally:
        if r.hget(RUNNING, ctx.id) == me:
            r.hdel(RUNNING, ctx.id)
    r.hincrby(EFFECTS, ctx.id, 1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_once(payload: str, ctx: TaskContext) -> None:
    """Fails attempt 1, applies the effect on attempt 2."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    effect(payload, ctx)



WHO = "seeds:who"
"""list: "<thread id> <time>" per task (in-process workers x concurrency 1: one thread each)."""


def who(payload: str) -> None:
    """Records which consume thread took the task, then holds it float(payload) seconds."""
    client().rpush(WHO, f"{threading.get_ident()} {time.time():.6f}")
    time.sleep(float(payload))
