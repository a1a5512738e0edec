"""The Lua scripts and their calls, without a client: the one loader of `taskqueue/wire/lua/`
(`lua`), each script's source and SHA, the KEYS and ARGV of the calls the worker and the operator
both make, and what an ACL refusal inside a script means.

No Redis client here: the worker sends these over its own connection (`taskqueue.worker.resp`,
no redis-py), the operator and the CLI through redis-py (`taskqueue.redisio.queueops.Script`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Collection, Sequence
from functools import cache
from typing import TypeVar

from taskqueue.wire import keys

_LUA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua")

LUA_CALL = re.compile(r"redis\.p?call\(\s*'([A-Za-z]+)'")
"""A Redis command called from Lua (`redis.call` or `redis.pcall`); group 1 is its name (for
ACL rules and NOPERM messages)."""

_SCRIPT_LINE = re.compile(r"@user_script:(\d+)")
T = TypeVar("T")


class Script:
    """A Lua script from `taskqueue/wire/lua/`, run by EVALSHA (and loaded again on NOSCRIPT: a
    restarted, failed-over or different server). One instance per name and caller kind; it refers
    to no client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = lua(name)
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
        command = LUA_CALL.search(line)
        name = command.group(1).lower() if command else "?"
        return (f"the Redis user has no permissions to run the '{name}' command (called by "
                f"{self.name}.lua line {found.group(1)}); add +{name} to its ACL rule")


@cache
def script(name: str) -> Script:
    """The shared `Script` for `taskqueue/wire/lua/<name>.lua`."""
    return Script(name)


def recover_call(
    schema: keys.KeySchema, *, worker_id: str, max_attempts: int, reason: str,
    tracking: bool = False,
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of recover.lua for `worker_id` (shared by the async and sync callers);
    `tracking` (spec.worker.tracking): each task's index says where it went."""
    return (
        [schema.processing(worker_id), schema.workers, schema.dead_letter, schema.stats,
         schema.flow_state, *schema.queue_keys],
        [worker_id, max_attempts, reason, schema.dead_letter_max_length,
         tracking_arg(schema, tracking=tracking), *schema.queue_types],
    )


def release_call(schema: keys.KeySchema, worker_id: str, entries: Sequence[str], *,
                 tracking: bool = False) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of release.lua giving back `entries` of `worker_id`; `tracking`
    (spec.worker.tracking): each task's index says queued again."""
    return ([schema.processing(worker_id), schema.dead_letter, schema.stats, schema.flow_state,
             *schema.queue_keys],
            [schema.dead_letter_max_length, tracking_arg(schema, tracking=tracking),
             *schema.queue_types, *entries])


def fetch_keys(schema: keys.KeySchema, worker_id: str) -> list[str]:
    """KEYS of fetch.lua for `worker_id`: the bookkeeping keys, then every queue."""
    return [schema.processing(worker_id), schema.delayed, schema.starvation, schema.stats,
            schema.dead_letter, schema.quiesced, schema.flow, schema.flow_state, schema.cancels,
            *schema.queue_keys]


def fetch_options(schema: keys.KeySchema, *, skip: Collection[str] = ()) -> str:
    """fetch.lua's queue options (ARGV[2]), one word per queue in KEYS order:
    "<type>:<starvation limit or empty>:<take>", take "0" for the keys in `skip` (they hold
    another type)."""
    return " ".join(
        f"{q.type}:{'' if q.starvation_limit is None else q.starvation_limit}:"
        f"{'0' if q.key in skip else '1'}"
        for q in schema.queues)


def fetch_args(schema: keys.KeySchema, *, now_ms: int | None, count: int, hold: bool,
               acks: Sequence[str] = (), skip: Collection[str] = (),
               tracking: bool = False, flow: bool = True, cancels: bool = True,
               ) -> list[str | int]:
    """The whole ARGV of one fetch.lua call (the worker pre-encodes the same parts itself):
    the dead-letter list's maximum length, the queue options, now ("": no promotion), count,
    hold, the task index's key prefix (`tracking_arg`), what to look at (`look_arg`), then
    the entries to ack."""
    return [schema.dead_letter_max_length, fetch_options(schema, skip=skip),
            "" if now_ms is None else now_ms, count, "1" if hold else "0",
            tracking_arg(schema, tracking=tracking), look_arg(flow=flow, cancels=cancels),
            *acks]


def look_arg(*, flow: bool, cancels: bool) -> str:
    """fetch.lua's ARGV[7]: "1" looks at the flow hashes and the cancels zset; "0" at the
    cancels zset only (the caller knows no flow hash exists: `worker.flowseen`); a second
    character "0" ("10", "00") also skips the cancels zset (the caller knows it holds no
    cancel: `worker.running.CancelsSeen`)."""
    return ("1" if flow else "0") + ("" if cancels else "0")


def tracking_arg(schema: keys.KeySchema, *, tracking: bool) -> str:
    """The task index's key prefix that fetch.lua, fail.lua, cancelled.lua, recover.lua and
    release.lua take: "" when tracking is off."""
    return schema.task_prefix if tracking else ""


@cache
def lua(name: str) -> str:
    """The source of `taskqueue/wire/lua/<name>.lua`, each `-- include: <lib>` line replaced by
    `taskqueue/wire/lua/lib/<lib>.lua` (Redis scripts cannot import; shared functions live
    there)."""
    lines = _read(os.path.join(_LUA_DIR, f"{name}.lua")).splitlines(keepends=True)
    return "".join(
        _read(os.path.join(_LUA_DIR, "lib", f"{line.split(':', 1)[1].strip()}.lua"))
        if line.startswith("-- include:") else line
        for line in lines
    )


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
