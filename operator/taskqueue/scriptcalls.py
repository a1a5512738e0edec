"""The Lua scripts' calls, without a client: each script's source and SHA, the KEYS and ARGV of
the calls the worker and the operator both make, and what an ACL refusal inside a script means.

No Redis client here: the worker sends these over its own connection (`taskqueue.worker.resp`,
no redis-py), the operator and the CLI through redis-py (`taskqueue.queueops.Script`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import TypeVar

from taskqueue import keys

_SCRIPT_LINE = re.compile(r"@user_script:(\d+)")
T = TypeVar("T")


class Script:
    """A Lua script from `taskqueue/lua/`, run by EVALSHA (and loaded again on NOSCRIPT: a
    restarted, failed-over or different server). One instance per name and caller kind; it refers
    to no client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = keys.lua(name)
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    def on_noscript(self, send: Callable[[], T], load: Callable[[str], object], *,
                    noscript: type[Exception], reply_error: type[Exception],
                    refused: Callable[[str], Exception]) -> T:
        """`send()` (an EVALSHA of this script on any synchronous transport); on `noscript`
        `load(source)` then `send()` again. A `reply_error` that is an ACL refusal inside the
        script is raised as `refused(message naming the command)`; the transport names its own
        error classes."""
        try:
            try:
                return send()
            except noscript:
                load(self.source)
                return send()
        except reply_error as exc:
            message = self.refusal(str(exc))
            if message is None:
                raise
            raise refused(message) from exc

    def refusal(self, error: str) -> str | None:
        """When the ACL refused a command inside this script (Redis names only the script
        line): a message naming the command and the rule to add; else None."""
        found = _SCRIPT_LINE.search(error)
        if "can't run this command" not in error or found is None:
            return None
        line = self.source.splitlines()[int(found.group(1)) - 1]
        command = keys.LUA_CALL.search(line)
        name = command.group(1).lower() if command else "?"
        return (f"the Redis user has no permissions to run the '{name}' command (called by "
                f"{self.name}.lua line {found.group(1)}); add +{name} to its ACL rule")


@cache
def script(name: str) -> Script:
    """The shared `Script` for `taskqueue/lua/<name>.lua`."""
    return Script(name)


def recover_call(
    schema: keys.KeySchema, *, worker_id: str, max_attempts: int, reason: str
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of recover.lua for `worker_id` (shared by the async and sync callers)."""
    return (
        [schema.processing(worker_id), schema.workers, schema.dead_letter, schema.stats,
         *schema.queue_keys],
        [worker_id, max_attempts, reason],
    )


def release_keys(schema: keys.KeySchema, worker_id: str) -> list[str]:
    """KEYS of release.lua for `worker_id` (the entries are its ARGV)."""
    return [schema.processing(worker_id), schema.dead_letter, *schema.queue_keys]


def fetch_keys(schema: keys.KeySchema, worker_id: str, *,
               queue_keys: Sequence[str] | None = None) -> list[str]:
    """KEYS of fetch.lua for `worker_id`, taking from `queue_keys` (default: every queue)."""
    queues = schema.queue_keys if queue_keys is None else queue_keys
    return [schema.processing(worker_id), schema.delayed, schema.starvation, schema.stats,
            schema.dead_letter, schema.quiesced, *queues]
