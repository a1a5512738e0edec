"""The producer client on a real redis-server and real workers: payloads given as bytes reach
the handler byte for byte, every option out of its range is refused before anything is sent, and
a push is sent once even when Redis stalls past the socket timeout."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import redis

from taskqueue import client
from taskqueue.cli.main import main as cli_main
from taskqueue.wire import keys
from tests.helpers import handlers
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker

NOT_UTF8 = [
    pytest.param(b"x\xffy", id="invalid-byte"),
    pytest.param(b"\xc3\x28 \xe2\x82", id="broken-sequences"),
    pytest.param(b'\xff"\\ \x00\n\r\t}', id="json-specials-and-nul"),
    pytest.param("caf\u00e9 \U0001f600".encode(), id="valid-utf8"),
    pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
    pytest.param(b"", id="empty"),
]


def recorded(url: str, n: int) -> list[bytes]:
    raw = redis.Redis.from_url(url)
    wait_for(f"{n} task(s) recorded", lambda: raw.llen(handlers.DONE) >= n, timeout=15)
    return list(raw.lrange(handlers.DONE, 0, -1))


@pytest.mark.parametrize("payload", NOT_UTF8)
def test_bytes_reach_a_sync_handler_byte_for_byte(redis_url: str, make_worker: MakeWorker,
                                                   payload: bytes) -> None:
    r = client.connect(redis_url)
    task_id = client.enqueue_sync(r, "q", payload)
    raw = redis.Redis.from_url(redis_url).lindex("q", 0)
    assert raw is not None and raw.startswith(keys.ENVELOPE_MARK.encode())
    make_worker()
    assert recorded(redis_url, 1) == [payload]
    assert task_id


@pytest.mark.parametrize("payload", NOT_UTF8)
def test_bytes_reach_an_async_handler_from_the_asyncio_client(
        redis_url: str, make_worker: MakeWorker, payload: bytes) -> None:
    async def push() -> str:
        r = client.connect_async(redis_url)
        try:
            return await client.enqueue(r, "q", payload)
        finally:
            await r.aclose()

    asyncio.run(push())
    make_worker(handler="tests.helpers.handlers:record_async_bytes")
    assert recorded(redis_url, 1) == [payload]


@pytest.mark.parametrize(("options", "zset"), [
    pytest.param({"priority": 2.0}, True, id="zset-priority"),
    pytest.param({"delay": 0.2}, False, id="scheduled"),
    pytest.param({"delay": 0.2, "priority": 1.0}, True, id="scheduled-zset"),
    pytest.param({"unique_for": 60}, False, id="unique"),
    pytest.param({"task_id": "order-7", "unique_for": 60}, False, id="unique-with-id"),
])
def test_bytes_keep_their_bytes_with_every_push_option(redis_url: str, make_worker: MakeWorker,
                                                       options: dict[str, Any],
                                                       zset: bool) -> None:
    payload = b"\xff\xfe scheduled \x80"
    client.enqueue_sync(client.connect(redis_url), "q", payload, **options)
    make_worker(queues=[{"key": "q", "type": "zset" if zset else "list"}])
    assert recorded(redis_url, 1) == [payload]


def test_many_bytes_payloads_in_one_push(redis_url: str, make_worker: MakeWorker) -> None:
    payloads = [bytes([i, 0xff - i]) + b" %d" % i for i in range(200)]
    ids = client.enqueue_many_sync(client.connect(redis_url), "q", payloads)
    assert len(set(ids)) == 200
    make_worker(worker={"concurrency": 4})
    assert sorted(recorded(redis_url, 200)) == sorted(payloads)


def test_a_command_handler_reads_the_bytes_on_stdin(redis_url: str,
                                                    make_worker: MakeWorker) -> None:
    script = ("import os,sys,redis; r=redis.Redis.from_url(os.environ['TASKQUEUE_TEST_REDIS_URL']);"
              "r.rpush('test:done', sys.stdin.buffer.read())")
    client.enqueue_sync(client.connect(redis_url), "q", b"\xff\x00bytes\n\xfe")
    make_worker(handler=None, worker={"command": [sys.executable, "-c", script]})
    assert recorded(redis_url, 1) == [b"\xff\x00bytes\n\xfe"]


def test_a_dead_letter_keeps_the_bytes(redis_url: str, make_worker: MakeWorker,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    client.enqueue_sync(client.connect(redis_url), "q", b"dead \xff\xfe")
    make_worker(handler="tests.helpers.handlers:record_then_fail", retry={"maxAttempts": 1})
    assert recorded(redis_url, 1) == [b"dead \xff\xfe"]
    wait_for("a dead letter", lambda: redis.Redis.from_url(redis_url).llen("q:dead"),
             timeout=10)
    capsys.readouterr()
    assert cli_main(["dlq", "list", "--json", "--redis-url", redis_url, "--queue", "q"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert base64.b64decode(record["payload_base64"]) == b"dead \xff\xfe"


def test_a_str_with_surrogate_escapes_is_the_same_as_its_bytes(redis_url: str,
                                                               make_worker: MakeWorker) -> None:
    # what a handler gets for bytes that are not UTF-8, pushed again (e.g. to another queue)
    client.enqueue_sync(client.connect(redis_url), "q", b"x\xffy".decode("utf-8",
                                                                         "surrogateescape"))
    make_worker()
    assert recorded(redis_url, 1) == [b"x\xffy"]


@pytest.mark.parametrize("payload", [pytest.param("\ud800", id="high-surrogate"),
                                     pytest.param("a\udc00", id="low-surrogate-below-0x80")])
def test_a_str_that_has_no_bytes_is_refused(redis_sync: redis.Redis, payload: str) -> None:
    with pytest.raises(ValueError, match="is a lone surrogate that stands for no byte; pass "
                                         "the payload as bytes"):
        client.enqueue_sync(redis_sync, "q", payload)
    assert redis_sync.dbsize() == 0


NOW = 1_000_000.0
TEN_YEARS = 315_360_000

BAD_OPTIONS = [
    pytest.param({"delay": math.nan}, "delay=nan: give seconds from 0 to 315360000 (10 years)",
                 id="delay-nan"),
    pytest.param({"delay": math.inf}, "delay=inf: give seconds from 0", id="delay-inf"),
    pytest.param({"delay": -1}, "delay=-1: give seconds from 0", id="delay-negative"),
    pytest.param({"delay": TEN_YEARS + 1}, "delay=315360001: give seconds from 0",
                 id="delay-too-far"),
    pytest.param({"delay": timedelta(days=10_000)}, "delay=864000000.0: give seconds",
                 id="delay-timedelta-too-far"),
    pytest.param({"delay": "soon"}, "delay='soon': give seconds", id="delay-not-a-number"),
    pytest.param({"at": math.nan}, "at=nan: give unix seconds", id="at-nan"),
    pytest.param({"at": -math.inf}, "at=-inf: give unix seconds", id="at-minus-inf"),
    pytest.param({"at": math.inf}, "at=inf: give unix seconds", id="at-inf"),
    pytest.param({"at": -5.0}, "at=-5.0: give unix seconds (or a datetime) from 0 to",
                 id="at-before-the-epoch"),
    pytest.param({"unique_for": math.nan}, "unique_for=nan: give seconds from 0.001",
                 id="unique-nan"),
    pytest.param({"unique_for": math.inf}, "unique_for=inf: give seconds", id="unique-inf"),
    pytest.param({"unique_for": 0.0001}, "unique_for=0.0001: give seconds from 0.001",
                 id="unique-under-a-millisecond"),
    pytest.param({"unique_for": 0}, "unique_for=0: give seconds from 0.001", id="unique-zero"),
    pytest.param({"priority": math.nan}, "priority=nan: give a finite number", id="priority-nan"),
    pytest.param({"priority": -math.inf}, "priority=-inf: give a finite number",
                 id="priority-inf"),
    pytest.param({"wait_replicas": -1}, "wait_replicas=-1: give a whole number of replicas",
                 id="replicas-negative"),
    pytest.param({"wait_replicas": 1.5}, "wait_replicas=1.5: give a whole number",
                 id="replicas-fraction"),
    pytest.param({"wait_timeout_ms": 0}, "wait_timeout_ms=0: give whole milliseconds from 1 "
                 "to 3600000 (WAIT 0 would block for ever)", id="wait-timeout-zero"),
    pytest.param({"wait_timeout_ms": math.nan}, "wait_timeout_ms=nan: give whole milliseconds",
                 id="wait-timeout-nan"),
    pytest.param({"task_id": "a\udcffb"}, "task_id='a\\udcffb' is not UTF-8 text",
                 id="id-not-text"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_plan_refuses_an_option_out_of_range(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        client.plan("q", "p", now=NOW, **{k: v for k, v in options.items()
                                           if k not in ("wait_replicas", "wait_timeout_ms")})
        client.durability(options.get("wait_replicas", 0),
                          options.get("wait_timeout_ms", client.WAIT_TIMEOUT_MS))


Push = Callable[..., Any]


def _sync(r: redis.Redis, url: str, **options: Any) -> Any:
    return client.enqueue_sync(r, "q", b"p", **options)


def _async(r: redis.Redis, url: str, **options: Any) -> Any:
    async def push() -> str:
        aio = client.connect_async(url)
        try:
            return await client.enqueue(aio, "q", b"p", **options)
        finally:
            await aio.aclose()

    return asyncio.run(push())


def _many(r: redis.Redis, url: str, **options: Any) -> Any:
    return client.enqueue_many_sync(r, "q", [b"p", b"q"], **options)


MANY_OPTIONS = ("priority", "wait_replicas", "wait_timeout_ms")
"""The options of `enqueue_many_sync`."""


@pytest.mark.parametrize(("push", "options", "message"), [
    *(pytest.param(push, *case.values, id=f"{push.__name__[1:]}-{case.id}")
      for push in (_sync, _async) for case in BAD_OPTIONS),
    *(pytest.param(_many, *case.values, id=f"many-{case.id}")
      for case in BAD_OPTIONS if set(case.values[0]) <= set(MANY_OPTIONS)),
])
def test_a_push_with_an_option_out_of_range_sends_nothing(
        redis_url: str, redis_sync: redis.Redis, push: Push, options: dict[str, Any],
        message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        push(client.connect(redis_url), redis_url, **options)
    assert redis_sync.dbsize() == 0


@pytest.mark.parametrize(("options", "due_in"), [
    pytest.param({"delay": 0}, None, id="delay-zero-now"),
    pytest.param({"delay": TEN_YEARS}, TEN_YEARS, id="delay-ten-years"),
    pytest.param({"at": 0.0}, None, id="at-the-epoch-now"),
    pytest.param({"at": NOW + TEN_YEARS}, TEN_YEARS, id="at-ten-years-ahead"),
])
def test_the_edges_of_the_ranges_are_accepted(options: dict[str, Any],
                                              due_in: float | None) -> None:
    due = client.due_ms(now=NOW, **{"delay": None, "at": None, **options})
    assert due == (None if due_in is None else int((NOW + due_in) * 1000))


BUSY = """local function now() local t = redis.call('TIME') return t[1] + t[2] / 1e6 end
local start = now()
while now() - start < tonumber(ARGV[1]) do end
return 1"""


@contextmanager
def stalled(url: str, seconds: float) -> Iterator[None]:
    """Redis does nothing else for `seconds` (a busy script blocks its event loop, as `DEBUG
    SLEEP` does): a command sent meanwhile runs after it, its reply late. Returns once the
    stall has begun; on exit, waits until it is over."""
    busy = threading.Thread(target=lambda: redis.Redis.from_url(url).eval(BUSY, 0, seconds))
    busy.start()
    probe = redis.Redis.from_url(url, socket_timeout=0.05)

    def stalled_now() -> bool:
        try:
            probe.ping()
        except redis.TimeoutError:
            return True
        return False

    wait_for("Redis to stall", stalled_now, timeout=10)
    try:
        yield
    finally:
        busy.join(timeout=seconds + 30)


def test_a_push_is_sent_once_when_redis_stalls_past_the_socket_timeout(
        redis_url: str, redis_sync: redis.Redis) -> None:
    producer = client.connect(redis_url, socket_timeout=0.3)
    producer.ping()
    with stalled(redis_url, 2.5), pytest.raises(redis.TimeoutError):
        client.enqueue_sync(producer, "q", "once")
    wait_for("the late push to run", lambda: redis_sync.llen("q") >= 1, timeout=10)
    time.sleep(0.5)
    assert [keys.unwrap(e).payload for e in redis_sync.lrange("q", 0, -1)] == ["once"]


def test_an_asyncio_push_is_sent_once_when_redis_stalls(redis_url: str,
                                                        redis_sync: redis.Redis) -> None:
    async def push() -> None:
        producer = client.connect_async(redis_url, socket_timeout=0.3)
        try:
            await producer.ping()
            with stalled(redis_url, 2.5), pytest.raises(redis.TimeoutError):
                await client.enqueue(producer, "q", "once")
        finally:
            await producer.aclose()

    asyncio.run(push())
    wait_for("the late push to run", lambda: redis_sync.llen("q") >= 1, timeout=10)
    time.sleep(0.5)
    assert redis_sync.llen("q") == 1


def test_a_unique_push_can_be_repeated_after_a_timeout(redis_url: str,
                                                       redis_sync: redis.Redis) -> None:
    # the documented way to retry a push whose outcome is unknown: an id and a unique window
    producer = client.connect(redis_url, socket_timeout=0.3)
    producer.ping()
    with stalled(redis_url, 1.5), pytest.raises(redis.TimeoutError):
        client.enqueue_sync(producer, "q", "p", task_id="order-7", unique_for=60)
    assert client.enqueue_sync(producer, "q", "p", task_id="order-7", unique_for=60) == "order-7"
    assert redis_sync.llen("q") == 1
