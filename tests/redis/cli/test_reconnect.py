"""The CLI's clients report a Redis that never answered at once (tests/unit/cli/test_errors.py),
and ride out a connection lost once Redis has answered (a failover in the middle of a `drain`
or a `dlq requeue --all`): the command is sent again on a new connection."""

from __future__ import annotations

import asyncio
import threading

import redis

from taskqueue.cli.target import Target
from tests.helpers.wait import wait_for


def _kill_other_clients(admin: redis.Redis) -> None:
    admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def _blocked_ids(admin: redis.Redis) -> set[int]:
    return {c["id"] for c in admin.client_list() if c.get("cmd") == "blpop"}


def test_a_connection_lost_after_redis_answered_is_retried(redis_url: str,
                                                           redis_sync: redis.Redis) -> None:
    """The connection is killed while a BLPOP waits on it: the BLPOP is sent again on a new
    connection and gets the task pushed after."""
    client = Target(redis_url=redis_url, schema=None, name="t").connect()
    assert client.ping()

    def kill_then_push() -> None:
        first = wait_for("the BLPOP to block", lambda: _blocked_ids(redis_sync), timeout=20)
        _kill_other_clients(redis_sync)
        wait_for("the BLPOP sent again", lambda: _blocked_ids(redis_sync) - first, timeout=20)
        redis_sync.lpush("jobs", "a")

    pusher = threading.Thread(target=kill_then_push)
    pusher.start()
    try:
        assert client.blpop(["jobs"], timeout=20) == ("jobs", "a")
    finally:
        pusher.join(timeout=30)
        client.close()


def test_an_asyncio_connection_lost_after_redis_answered_is_retried(
        redis_url: str, redis_sync: redis.Redis) -> None:
    async def ids() -> tuple[int, int]:
        client = Target(redis_url=redis_url, schema=None, name="t").connect_async()
        try:
            first = await client.client_id()
            _kill_other_clients(redis_sync)
            return first, await client.client_id()
        finally:
            await client.aclose()

    first, again = asyncio.run(ids())
    assert again != first
