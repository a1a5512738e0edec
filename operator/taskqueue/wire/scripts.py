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
from dataclasses import dataclass
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
               tracking: bool = False) -> list[str | int]:
    """The whole ARGV of one fetch.lua call (the worker pre-encodes the same parts itself):
    the dead-letter list's maximum length, the queue options, now ("": no promotion), count,
    hold, the task index's key prefix (`tracking_arg`), then the entries to ack."""
    return [schema.dead_letter_max_length, fetch_options(schema, skip=skip),
            "" if now_ms is None else now_ms, count, "1" if hold else "0",
            tracking_arg(schema, tracking=tracking), *acks]


def tracking_arg(schema: keys.KeySchema, *, tracking: bool) -> str:
    """The task index's key prefix that fetch.lua, fail.lua, cancelled.lua, recover.lua and
    release.lua take: "" when tracking is off."""
    return schema.task_prefix if tracking else ""


@cache
def lua(name: str) -> str:
    """The source of `taskqueue/wire/lua/<name>.lua`, its `-- include: <lib>` lines replaced by
    the definitions of `taskqueue/wire/lua/lib/<lib>.lua` it uses (Redis scripts cannot import;
    shared functions live there). Only those a script uses, directly or through another
    definition (`needed`), are spliced in, in their libraries' order: every call builds each
    local function of the script again, and the ACL rules derived from a script (`LUA_CALL`)
    name only the commands it can run.

    A `-- deferred: <name>...` line names library definitions the script calls only on rare
    branches: those, and what only they use, are declared with the others but built where the
    script's one `load_deferred()` call stands (replaced by `_deferred`), not on every call."""
    lines = _read(os.path.join(_LUA_DIR, f"{name}.lua")).splitlines(keepends=True)
    libs = [line.split(":", 1)[1].strip() for line in lines if line.startswith("-- include:")]
    later = {n for line in lines if line.startswith("-- deferred:")
             for n in line.split(":", 1)[1].split()}
    body = [line for line in lines if not line.startswith(("-- include:", "-- deferred:"))]
    if not libs:
        return "".join(body)
    definitions = [d for lib in libs for d in _library(lib)]
    uses = _names("".join(body))
    eager = needed(definitions, uses - later, stop=later)
    deferred = [d for d in needed(definitions, later) if d not in eager]
    spliced = "".join(d.text for d in eager)
    if later:
        body = _deferred(body, deferred)
        spliced = f"local {_names_of(deferred)} -- built by load_deferred()\n" + spliced
    at = next(i for i, line in enumerate(lines) if line.startswith("-- include:"))
    return "".join(body[:at]) + spliced + "".join(body[at:])


def _names_of(definitions: Sequence[Definition]) -> str:
    return ", ".join(n for d in definitions for n in d.names)


def _deferred(body: list[str], deferred: Sequence[Definition]) -> list[str]:
    """`body` with its one `load_deferred()` call replaced by the assignment of the deferred
    definitions (built inside a function, so that closure and its upvalues exist only when
    that line runs) to the locals declared above the eager definitions."""
    calls = [i for i, line in enumerate(body) if "load_deferred()" in line]
    if len(calls) != 1:
        raise ValueError("a script with `-- deferred:` lines calls load_deferred() once, "
                         f"not {len(calls)} times")
    names = _names_of(deferred)
    block = (f"{names} = (function()\n" + "".join(d.text for d in deferred)
             + f"return {names}\nend)()")
    at = calls[0]
    return [*body[:at], body[at].replace("load_deferred()", block), *body[at + 1:]]


@dataclass(frozen=True)
class Definition:
    """One top-level `local` of a Lua library: the names it defines, its text (with the
    comment lines just above it) and the names its code mentions."""

    names: tuple[str, ...]
    text: str
    uses: frozenset[str]


_DEFINES = re.compile(r"local (?:function (\w+)\s*\(|([\w\s,]+?)\s*=)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_QUOTED_OR_COMMENT = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|(--[^\n]*)")


def needed(definitions: Sequence[Definition], uses: Collection[str], *,
           stop: Collection[str] = ()) -> list[Definition]:
    """The `definitions` that names in `uses` refer to, with those they refer to in turn (not
    through a name in `stop`), in their order in `definitions` (a Lua local is seen only below
    its definition, so the order of the libraries already puts each one after those it uses).
    A name defined twice is an error (the libraries share one scope in a script)."""
    owner: dict[str, int] = {}
    for i, definition in enumerate(definitions):
        for n in definition.names:
            if n in owner:
                raise ValueError(f"Lua library name {n!r} is defined twice")
            owner[n] = i
    wanted: set[int] = set()
    pending = [owner[n] for n in uses if n in owner]
    while pending:
        i = pending.pop()
        if i not in wanted:
            wanted.add(i)
            pending += [owner[n] for n in definitions[i].uses if n in owner and n not in stop]
    return [definitions[i] for i in sorted(wanted)]


def parse_library(source: str, *, lib: str = "?") -> list[Definition]:
    """The top-level definitions of a Lua library's `source`: each starts at a `local` line in
    column 0 and runs to the next one (indented lines and the closing `end` or `}` included);
    the comment lines just above it (no blank line between) go with it, the file's opening
    comment with none. Any other top-level code is refused: it would run in some scripts and
    not in others."""
    out: list[Definition] = []
    current: list[str] = []
    head = ""
    above: list[str] = []
    for line in source.splitlines(keepends=True):
        if line.startswith("local "):
            split = max((i + 1 for i, kept in enumerate(above) if not kept.strip()), default=0)
            if current:
                out.append(_definition(head, current + above[:split]))
            head, current, above = line, [*above[split:], line], []
        elif line.startswith("--") or not line.strip():
            above.append(line)
        elif current and line.startswith((" ", "\t", "end", "}", ")")):
            current += [*above, line]
            above = []
        else:
            raise ValueError(f"lua/lib/{lib}.lua: top-level code outside a `local` definition: "
                             f"{line.rstrip()!r}")
    if current:
        out.append(_definition(head, current + above))
    return out


def _definition(head: str, lines: list[str]) -> Definition:
    found = _DEFINES.match(head)
    if found is None:
        raise ValueError(f"not a `local name =` or `local function name(` line: {head!r}")
    names = ((found.group(1),) if found.group(1)
             else tuple(n.strip() for n in found.group(2).split(",")))
    text = "".join(lines)
    return Definition(names=names, text=text, uses=frozenset(_names(text) - set(names)))


def _names(code: str) -> frozenset[str]:
    """The identifiers `code` mentions outside its comments (words inside strings count: a
    definition spliced in for nothing costs time, one left out breaks the script)."""
    return frozenset(_WORD.findall(_QUOTED_OR_COMMENT.sub(
        lambda m: "" if m.group(1) else m.group(0), code)))


@cache
def _library(lib: str) -> tuple[Definition, ...]:
    return tuple(parse_library(_read(os.path.join(_LUA_DIR, "lib", f"{lib}.lua")), lib=lib))


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
