"""Redis Cluster hash tags: which slot-sharing part of a key Redis hashes, and whether all keys
of a TaskQueue share one (so every script of it runs on one node). Pure."""

from __future__ import annotations

import re

#: The hash tag of a Redis key as Redis Cluster computes it: the text between the first "{" and
#: the first "}" after it, when not empty.
_HASH_TAG_RE = re.compile(r"^[^{]*\{([^}]+)\}")

__all__ = ["cluster_key_problem", "hash_tag"]


def hash_tag(key: str) -> str | None:
    """The hash tag of `key` ("emails" for "{emails}:vip"), None when it has none."""
    found = _HASH_TAG_RE.match(key)
    return found.group(1) if found else None


def cluster_key_problem(queue_keys: list[str], *, key_prefix: str,
                        dead_letter: str) -> str | None:
    """Why these keys cannot all live in one Redis Cluster hash slot (None when they can).

    Every script of a TaskQueue touches several of its keys at once, so all of them (queues,
    keyPrefix and the dead-letter key) must carry the same hash tag. The message shows the fix.
    """
    named = [(f"spec.queues[{i}].key", k) for i, k in enumerate(queue_keys)]
    named += [("spec.keyPrefix", key_prefix), ("spec.retry.deadLetterKey", dead_letter)]
    tags = {hash_tag(k) for _, k in named}
    if len(tags) == 1 and None not in tags:
        return None
    tag = hash_tag(queue_keys[0]) or queue_keys[0].split(":", 1)[0]
    wrong = [(field, k) for field, k in named if hash_tag(k) != tag]
    fixes = ", ".join(f"{field} {k!r} -> {_with_tag(k, tag)!r}" for field, k in wrong)
    return (
        "spec.redis.mode cluster: every key of a TaskQueue must share one hash tag so that "
        f"all of them live in one slot; use {{{tag}}} in each: {fixes}"
    )


def _with_tag(key: str, tag: str) -> str:
    bare = key.replace("{", "").replace("}", "")
    if bare == tag or bare.startswith(tag + ":"):
        return "{" + tag + "}" + bare[len(tag):]
    return "{" + tag + "}:" + bare
