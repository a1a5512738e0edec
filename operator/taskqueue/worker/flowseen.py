"""What one worker process has seen of its TaskQueue's flow control (`<prefix>:flow`): whether
fetch.lua needs to look at the flow hashes at all, and which queues are paused.

fetch.lua enforces rate limits, in-flight limits and pauses atomically from the two flow
hashes (lua/lib/flow.lua). A TaskQueue that uses none has neither hash, and looking for them
in every fetch was a measurable share of the script's time (docs/benchmarks.md, "no cost when
unused"). So the worker tells the script whether to look (`Store` sends `on` with each fetch),
and the `flowwatch` thread keeps `on` and `paused` fresh with one read every
`flowwatch.CHECK_SECONDS`. `on` starts True: until the first read the script looks, as it
always may. Writes are single attribute stores, read without a lock (one reader per fetch).
"""

from __future__ import annotations


class FlowSeen:
    """The flow hashes as last read by the worker's `flowwatch` thread."""

    __slots__ = ("on", "paused")

    def __init__(self) -> None:
        self.on = True
        """Either flow hash exists (or has not been read yet): fetch.lua checks the limits."""
        self.paused: frozenset[str] = frozenset()
        """Queue keys paused by the spec or by `taskqueue pause` (the blocking pops, which
        cannot run the script, leave them out)."""

    def unpaused(self, queue_keys: tuple[str, ...]) -> tuple[str, ...]:
        """`queue_keys` without the paused ones, in their order."""
        paused = self.paused
        return tuple(k for k in queue_keys if k not in paused) if paused else queue_keys
