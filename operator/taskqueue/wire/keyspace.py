"""The Redis keys one TaskQueue owns, by name and type, and the collisions between them. Pure.

A TaskQueue owns its queue keys, its dead-letter list (`<first queue>:dead` unless
spec.retry.deadLetterKey names one), the bookkeeping keys `<prefix>:<name>` of `BOOKKEEPING`
and the key families `<prefix>:<name>:<id>` of `FAMILIES` (prefix = spec.keyPrefix, default the
first queue key). Each has one Redis type, named here once: the CLI's and the worker's
WRONGTYPE checks read it (`KeySchema.expected_types`), and a test holds the Lua scripts' key
checks to it. `taskqueue.wire.keys.KeySchema` builds every one of these names from here, and the
models refuse a spec in which two of them are the same key (`collision`): a dead-letter list
that is also a queue runs each dead-letter record as a task again, and a queue that is the
delayed zset or a processing list mixes tasks with bookkeeping. This module sits below the
models so that they, the worker and the CLI share the one rule; `taskqueue.api.crdgen` writes the
parts of it that CEL can express into the CRD.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

KEY_PATTERN = r"^[^\x00-\x20\x7f]{1,512}$"
r"""A Redis key usable as a queue or a dead-letter list: 1 to 512 characters, no space or control
character (an entry's header separates its parts with newlines). Written with explicit code
points, not `\s`: the API server's regex engine (Go), pydantic's (Rust) and Python's each read
`\s` differently."""
_KEY_RE = re.compile(KEY_PATTERN)

DEAD_SUFFIX = ":dead"
"""The default dead-letter list of a TaskQueue is its first queue key plus this."""



class Owned(NamedTuple):
    """A key (or key family) a TaskQueue owns: its Redis type and what it holds."""

    type: str
    """The Redis type (`TYPE key`) the key holds when it exists."""
    what: str


BOOKKEEPING: dict[str, Owned] = {
    "workers": Owned("zset", "workers zset"),
    "delayed": Owned("zset", "delayed zset (retries and scheduled tasks)"),
    "starvation": Owned("hash", "starvation counters hash"),
    "stats": Owned("hash", "stats hash"),
    "quiesced": Owned("set", "quiesced-workers set"),
    "flow": Owned("hash", "flow-control hash (rate limits, in-flight limits, pauses)"),
    "flowstate": Owned("hash", "flow-state hash (rate-limit times, tasks in flight)"),
    "history": Owned("stream", "history stream"),
    "decisions": Owned("stream", "decision-log stream"),
    "schedules": Owned("hash", "schedules hash (each schedule's last slot, counts)"),
    "cancels": Owned("zset", "cancelled task ids zset"),
}
"""`<prefix>:<name>` -> its type and what it holds."""

FAMILIES: dict[str, Owned] = {
    "processing": Owned("list", "processing lists of the workers"),
    "done": Owned("string", "idempotency done markers"),
    "running": Owned("string", "idempotency running leases"),
    "unique": Owned("string", "unique-enqueue markers"),
    "fired": Owned("string", "fired schedule slots"),
    "task": Owned("hash", "task index hashes (spec.worker.tracking)"),
    "progress": Owned("hash", "progress hashes of the workers"),
    "started": Owned("string", "start times of the workers' running tasks"),
}
"""`<prefix>:<name>:<id>` -> the type and what the keys of the family hold."""

DEAD_LETTER_TYPE = "list"
"""The dead-letter list's type (a queue's type is its spec's: list or zset)."""


def is_valid_key(key: str) -> bool:
    """True when `key` can name a queue (KEY_PATTERN: 1..512 characters, no space or control
    character)."""
    return _KEY_RE.match(key) is not None


def default_dead_letter(first_queue: str) -> str:
    """The dead-letter list of a TaskQueue whose spec names none."""
    return first_queue + DEAD_SUFFIX


def bookkeeping_key(prefix: str, name: str) -> str:
    """`<prefix>:<name>`, one of BOOKKEEPING."""
    return f"{prefix}:{name}"


def family_prefix(prefix: str, name: str) -> str:
    """`<prefix>:<name>:`, the start of every key of one of FAMILIES."""
    return f"{prefix}:{name}:"


@dataclass(frozen=True)
class Labels:
    """How a message names the keys: the spec's fields (models) or the command-line flags."""

    queue: str = "spec.queues[{i}].key"
    dead_letter: str = "spec.retry.deadLetterKey"
    key_prefix: str = "spec.keyPrefix"


SPEC_LABELS = Labels()
FLAG_LABELS = Labels(queue="--queue", dead_letter="--dead-letter-key", key_prefix="--key-prefix")


def owner(key: str, prefix: str) -> str | None:
    """What `key` is among the keys `prefix` derives ("<keyPrefix>:delayed, the TaskQueue's
    delayed zset ..."), None when it is none of them."""
    for name, owned in BOOKKEEPING.items():
        if key == bookkeeping_key(prefix, name):
            return f"<keyPrefix>:{name}, the TaskQueue's {owned.what}"
    for name, owned in FAMILIES.items():
        if key.startswith(family_prefix(prefix, name)):
            return f"one of <keyPrefix>:{name}:<id>, the TaskQueue's {owned.what}"
    return None


def owned_type(key: str, prefix: str) -> str | None:
    """The type of `key` when it is one of the keys `prefix` derives (BOOKKEEPING, FAMILIES),
    else None."""
    for name, owned in BOOKKEEPING.items():
        if key == bookkeeping_key(prefix, name):
            return owned.type
    for name, owned in FAMILIES.items():
        if key.startswith(family_prefix(prefix, name)):
            return owned.type
    return None


def collision(queue_keys: Sequence[str], *, key_prefix: str | None, dead_letter: str | None,
              labels: Labels = SPEC_LABELS) -> str | None:
    """The first pair of names of one TaskQueue that are the same Redis key, as one line naming
    both and the fix; None when every key is its own. `key_prefix` and `dead_letter` are None
    when the spec leaves them to their defaults.

    Refused: a queue listed twice; a queue that is the dead-letter list, or the default
    dead-letter list `<queue>:dead` of another queue; a queue or the dead-letter list that is a
    bookkeeping key `<prefix>:<name>` or in a key family `<prefix>:<name>:<id>`.
    """
    if not queue_keys:
        return None
    named = [(labels.queue.format(i=i), k) for i, k in enumerate(queue_keys)]
    prefix = key_prefix or queue_keys[0]
    dead = dead_letter or default_dead_letter(queue_keys[0])
    return (_queue_twice(named) or _queue_is_dead_letter(named, dead, dead_letter, prefix, labels)
            or _queue_is_default_dead_letter(named)
            or _owned(named, dead, prefix, key_prefix, dead_letter, labels))


def _queue_twice(named: list[tuple[str, str]]) -> str | None:
    for i, (label, key) in enumerate(named):
        for other, other_key in named[:i]:
            if key == other_key:
                return f"{label} {key!r} is also {other}: list each queue once"
    return None


def _queue_is_dead_letter(named: list[tuple[str, str]], dead: str, configured: str | None,
                          prefix: str, labels: Labels) -> str | None:
    for label, key in named:
        if key != dead:
            continue
        if configured is None:
            return (f"{label} {key!r} is the default dead-letter list of {named[0][0]} "
                    f"{named[0][1]!r} (<first queue>{DEAD_SUFFIX}): rename the queue, or set "
                    f"{labels.dead_letter} to another key")
        return (f"{label} {key!r} is also {labels.dead_letter} {dead!r}: dead-letter records "
                f"would be taken as tasks and fail again; use another {labels.dead_letter}, "
                f"e.g. {_free_dead_letter(named, prefix)!r}")
    return None


def _queue_is_default_dead_letter(named: list[tuple[str, str]]) -> str | None:
    for label, key in named:
        for other, other_key in named:
            if key == default_dead_letter(other_key):
                return (f"{label} {key!r} is the dead-letter name of {other} {other_key!r} "
                        f"(<queue>{DEAD_SUFFIX}, the default dead-letter list of a TaskQueue "
                        f"whose first queue it is): rename the queue")
    return None


def _owned(named: list[tuple[str, str]], dead: str, prefix: str, key_prefix: str | None,
           dead_letter: str | None, labels: Labels) -> str | None:
    where = (f"{labels.key_prefix} {prefix!r}" if key_prefix is not None else
             f"{labels.key_prefix} unset: the first queue key {prefix!r}")
    for label, key in named:
        what = owner(key, prefix)
        if what is not None:
            return (f"{label} {key!r} is {what} ({where}): rename the queue, or set "
                    f"{labels.key_prefix} to another prefix")
    what = owner(dead, prefix)
    if what is not None:
        label = labels.dead_letter if dead_letter is not None else (
            f"the dead-letter list ({labels.dead_letter} unset: <first queue>{DEAD_SUFFIX})")
        return (f"{label} {dead!r} is {what} ({where}): use another {labels.dead_letter}, e.g. "
                f"{_free_dead_letter(named, prefix)!r}, or set {labels.key_prefix} to another "
                "prefix")
    return None


def _free_dead_letter(named: list[tuple[str, str]], prefix: str) -> str:
    """A dead-letter key that collides with nothing, for the fix in a message."""
    taken = {k for _, k in named}
    first = named[0][1]
    for candidate in (default_dead_letter(first), f"{first}:dead-letters", f"{first}:failed"):
        if candidate not in taken and owner(candidate, prefix) is None:
            return candidate
    return f"{first}:dead-{len(taken)}"
