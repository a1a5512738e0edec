"""What one worker process has seen of its TaskQueue's pauses (`<prefix>:flow`): the queues a
blocking pop must leave out.

fetch.lua enforces rate limits, in-flight limits and pauses atomically from the two flow
hashes (lua/lib/flow.lua), in every fetch. A blocking pop (AtMostOnce: BRPOP/BZPOPMIN) runs no
script, so the worker leaves the paused queues out of its keys itself; the `flowwatch` thread
keeps `paused` fresh with one read every `flowwatch.CHECK_SECONDS`. Writes are single attribute
stores, read without a lock (one reader per pop).
"""

from __future__ import annotations


class FlowSeen:
    """The pauses as last read by the worker's `flowwatch` thread."""

    __slots__ = ("paused",)

    def __init__(self) -> None:
        self.paused: frozenset[str] = frozenset()
        """Queue keys paused by the spec or by `taskqueue pause` (the blocking pops, which
        cannot run the script, leave them out)."""

    def unpaused(self, queue_keys: tuple[str, ...]) -> tuple[str, ...]:
        """`queue_keys` without the paused ones, in their order."""
        paused = self.paused
        return tuple(k for k in queue_keys if k not in paused) if paused else queue_keys
