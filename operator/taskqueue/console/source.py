"""Where the console's TaskQueues come from and how it reaches their Redis.

`LocalSource`: the one TaskQueue of `taskqueue console -f FILE` (or `--redis-url` + `--queue`s),
its Redis client made once. A source hands out an asyncio client for the pages and a CLI
`Target` for the actions (which run the CLI's dead-letter code on a synchronous client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from taskqueue.cli.target import Target
from taskqueue.console.views import Hosted

if TYPE_CHECKING:
    import redis.asyncio as aioredis


class Source(Protocol):
    async def taskqueues(self) -> list[Hosted]:
        """Every TaskQueue this console shows."""
        ...

    def client(self, tq: Hosted) -> aioredis.Redis:
        """The asyncio client of `tq`'s Redis (shared, made once)."""
        ...

    def target(self, tq: Hosted) -> Target:
        """`tq` as the CLI's target (the actions)."""
        ...

    async def close(self) -> None: ...


class LocalSource:
    """One TaskQueue from the command line."""

    def __init__(self, *, target: Target, hosted: Hosted) -> None:
        self._target = target
        self._hosted = hosted
        self._client = target.connect_async()

    async def taskqueues(self) -> list[Hosted]:
        return [self._hosted]

    def client(self, tq: Hosted) -> aioredis.Redis:
        return self._client

    def target(self, tq: Hosted) -> Target:
        return self._target

    async def close(self) -> None:
        await self._client.aclose()
