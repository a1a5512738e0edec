"""The Redis type of each key of a TaskQueue is written once (`keyspace`, read through
`KeySchema.type_of` and `expected_types`): the WRONGTYPE checks of the CLI and the worker read
it, and here the table of `taskqueue.wire.keys` and every key check of the Lua scripts are held
to it."""

from __future__ import annotations

import re

import pytest

from taskqueue.wire import keys, keyspace, scripts

SCHEMA = keys.KeySchema(prefix="p", dead_letter="p:dead",
                        queues=(keys.QueueRef(key="a"), keys.QueueRef(key="b", type="zset")))


@pytest.mark.parametrize(("key", "kind"), [
    pytest.param("a", "list", id="list-queue"),
    pytest.param("b", "zset", id="zset-queue"),
    pytest.param("p:dead", "list", id="dead-letter"),
    pytest.param("p:workers", "zset", id="workers"),
    pytest.param("p:delayed", "zset", id="delayed"),
    pytest.param("p:starvation", "hash", id="starvation"),
    pytest.param("p:stats", "hash", id="stats"),
    pytest.param("p:quiesced", "set", id="quiesced"),
    pytest.param("p:processing:w1", "list", id="processing"),
    pytest.param("p:done:t1", "string", id="done"),
    pytest.param("p:running:t1", "string", id="running"),
    pytest.param("p:unique:t1", "string", id="unique"),
    pytest.param("p:schedules", "hash", id="schedules"),
    pytest.param("p:fired:s:2026-01-01T00:00:00Z", "string", id="fired"),
    pytest.param("p:cancels", "zset", id="cancels"),
    pytest.param("p:task:t1", "hash", id="task-index"),
    pytest.param("p:progress:w1", "hash", id="progress"),
    pytest.param("p:other", None, id="not-owned"),
    pytest.param("a:dead", None, id="another-name"),
])
def test_type_of_each_key(key: str, kind: str | None) -> None:
    assert SCHEMA.type_of(key) == kind


def test_expected_types_are_the_fixed_keys_then_the_processing_lists() -> None:
    assert SCHEMA.expected_types(processing=["p:processing:w1"]) == {
        "a": "list", "b": "zset", "p:workers": "zset", "p:delayed": "zset",
        "p:starvation": "hash", "p:stats": "hash", "p:quiesced": "set", "p:flow": "hash",
        "p:flowstate": "hash", "p:history": "stream", "p:decisions": "stream",
        "p:schedules": "hash", "p:cancels": "zset", "p:dead": "list",
        "p:processing:w1": "list"}


def _table_rows() -> list[tuple[str, str]]:
    """(key, type) of each row of the key table in the docstring of `taskqueue.wire.keys`."""
    assert keys.__doc__ is not None
    rows = []
    for line in keys.__doc__.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[1] and cells[1] != "type":
            rows.append((cells[0], cells[1]))
    return rows


def test_the_table_of_the_keys_module_says_the_types_keyspace_owns() -> None:
    names = {"<queue key> (each of spec.queues)": "a", "<dead-letter key>": "p:dead"}
    rows = _table_rows()
    for key, kind in rows:
        if key == "":  # a second type of the row above: a zset queue
            assert SCHEMA.type_of("b") == kind
            continue
        concrete = names.get(key) or re.sub(r"<[a-z ]+>", "x", key.replace("<prefix>", "p"))
        assert SCHEMA.type_of(concrete) == kind, key
    documented = {key for key, _ in rows}
    assert {f"<prefix>:{name}" for name in keyspace.BOOKKEEPING} <= documented
    by_worker = ("processing", "progress", "started")
    assert {f"<prefix>:{name}:<{'worker' if name in by_worker else 'task'} id>"
            for name in keyspace.FAMILIES} <= documented


W, T = "w", "t"
LAYOUTS = {
    "fetch": scripts.fetch_keys(SCHEMA, W),
    "recover": scripts.recover_call(SCHEMA, worker_id=W, max_attempts=1, reason="")[0],
    "release": scripts.release_call(SCHEMA, W, [])[0],
    # the worker's calls (worker/store.py, worker/idempotency.py)
    "fail": [SCHEMA.processing(W), SCHEMA.delayed, SCHEMA.dead_letter, SCHEMA.stats],
    "heartbeat": [SCHEMA.workers, SCHEMA.stats, SCHEMA.started(W)],
    "claim": [SCHEMA.processing(W), SCHEMA.done(T), SCHEMA.running(T), SCHEMA.delayed,
              SCHEMA.stats],
    "complete": [SCHEMA.processing(W), SCHEMA.done(T), SCHEMA.running(T), SCHEMA.stats],
    # the operator's call (controller/schedules.py)
    "fire": [SCHEMA.schedules, SCHEMA.delayed, SCHEMA.workers, *SCHEMA.queue_keys],
}
"""The KEYS of each script that checks the type of a fixed key, as its callers build them."""

_CALL = re.compile(r"misfit\(\{(.*?)\}\)|wrong_type\((KEYS\[\d+\],\s*'\w+')\)", re.DOTALL)
"""A call of lib/entry.lua's `misfit({key, type, ...})` or `wrong_type(key, type)`."""
_PAIR = re.compile(r"KEYS\[(\d+)\],\s*'(\w+)'")
"""`KEYS[n], 'type'`."""
_EITHER = re.compile(r"(\w+) and KEYS\[(\d+)\] or KEYS\[(\d+)\],\s*\1 and '(\w+)' or '(\w+)'")
"""`c and KEYS[n] or KEYS[m], c and 'type' or 'type'`: one of two keys, by a condition."""
LUA_NAMES = ("claim", "complete", "enqueue", "fail", "fetch", "fire", "heartbeat", "lease",
             "observe", "recover", "release")


_ALIAS = re.compile(r"^local (\w+) = (KEYS\[\d+\])", re.MULTILINE)
"""`local name = KEYS[n]`: the named locals a script opens with."""


def _checks(source: str) -> list[tuple[int, str]]:
    """(n, type) of every `KEYS[n]` whose type a script checks, by index or by the local that
    names it (a queue's type comes from ARGV, so `KEYS[1], zadd and 'zset' or 'list'` of
    enqueue.lua is none of these)."""
    found = []
    aliases = dict(_ALIAS.findall(source))
    for name, key in aliases.items():
        source = re.sub(rf"\b{name}\b(?!\s*=)", key, source)
    for misfit, wrong_type in _CALL.findall(source):
        args = misfit or wrong_type
        found += [(int(n), kind) for n, kind in _PAIR.findall(args)]
        for _, first, second, kind_first, kind_second in _EITHER.findall(args):
            found += [(int(first), kind_first), (int(second), kind_second)]
    return found


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_key_check_of_a_script_expects_the_type_keyspace_owns(name: str) -> None:
    checks = _checks(scripts.lua(name))
    assert checks, f"{name}.lua checks no key type: update LAYOUTS or the patterns"
    for index, kind in checks:
        key = LAYOUTS[name][index - 1]
        assert SCHEMA.type_of(key) == kind, f"{name}.lua KEYS[{index}] ({key})"


def test_every_script_that_checks_a_fixed_key_is_in_the_table() -> None:
    assert {n for n in LUA_NAMES if _checks(scripts.lua(n))} == set(LAYOUTS)
