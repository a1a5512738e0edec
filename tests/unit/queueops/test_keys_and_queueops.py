"""The key schema, the envelope and the scripts' sources and calls, without a server (the shared
Redis operations on a real one: tests/redis/queueops/test_keys_and_queueops.py)."""

from __future__ import annotations

from importlib import resources

import pytest

from taskqueue.api import manifest
from taskqueue.redisio import queueops
from taskqueue.wire import keys, scripts


def _spec(**spec: object) -> keys.KeySchema:
    base: dict[str, object] = {
        "redis": {"url": "redis://localhost"},
        "queues": [{"key": "vip", "starvationLimit": 3}, {"key": "normal"}],
    }
    base.update(spec)
    return keys.KeySchema.from_spec(manifest.parse({"kind": "TaskQueue", "spec": base}).spec)


@pytest.mark.parametrize(
    ("payload", "attempts"),
    [
        pytest.param("plain", 0, id="ascii"),
        pytest.param('{"json": "payload"}', 2, id="json-payload"),
        pytest.param("ünïcödé\nnewline", 5, id="unicode-and-newline"),
    ],
)
def test_envelope_round_trips_the_original_payload(payload: str, attempts: int) -> None:
    element = keys.wrap(payload, attempts=attempts, task_id="t1")
    task = keys.unwrap(element)
    assert (task.payload, task.attempts, task.id, task.enveloped) == (
        payload, attempts, "t1", True
    )
    assert element.startswith(keys.ENVELOPE_MARK)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("101", id="number"),
        pytest.param('{"__taskqueue__": 1}', id="lookalike-json-with-spaces"),
        pytest.param(keys.ENVELOPE_MARK + "garbage", id="broken-envelope"),
    ],
)
def test_raw_payloads_are_delivered_unchanged(raw: str) -> None:
    assert keys.unwrap(raw).payload == raw


def test_default_names_derive_from_the_first_queue() -> None:
    schema = _spec()
    assert (schema.prefix, schema.dead_letter, schema.workers) == ("vip", "vip:dead", "vip:workers")
    assert schema.processing("w1") == "vip:processing:w1"
    custom = _spec(keyPrefix="jobs", retry={"deadLetterKey": "dlq"})
    assert (custom.delayed, custom.dead_letter) == ("jobs:delayed", "dlq")


@pytest.mark.parametrize("name", ["fetch", "release", "recover", "fail"])
def test_scripts_get_the_shared_entry_library_inlined(name: str) -> None:
    source = scripts.lua(name)
    assert "local function push_dead(dead, stats, max_length, record)" in source
    assert not any(line.startswith("-- include:") for line in source.splitlines())


@pytest.mark.parametrize("name", ["fail", "fetch", "heartbeat", "observe", "recover", "release"])
def test_no_script_has_its_own_parser_of_the_wire_formats(name: str) -> None:
    own = (resources.files("taskqueue.wire") / "lua" / f"{name}.lua").read_text("utf-8")
    assert "__taskqueue__" not in own, "the envelope belongs to lua/lib/entry.lua"
    assert "'\\n', 1, true" not in own, "entries are split by lua/lib/entry.lua"
    assert "cjson.encode({" not in own, "dead-letter records are built by lua/lib/entry.lua"


def test_observe_declares_every_key_it_reads() -> None:
    schema = _spec(queues=[{"key": "q"}, {"key": "z", "type": "zset"}])
    keys_, args = queueops.observe_call(schema, ["w1", "w2"])
    assert keys_ == [schema.workers, schema.delayed, schema.dead_letter, schema.stats,
                     schema.quiesced, "q", "z", schema.processing("w1"), schema.processing("w2"),
                     schema.started("w1"), schema.started("w2")]
    fields = ["taken:q", "taken:z", "service_ms:q", "service_ms:z", "served:q", "served:z",
              "service_sq_ms2:q", "service_sq_ms2:z", "served_sq:q", "served_sq:z",
              "waited:q", *(f"waited_over:{e:g}:q" for e in keys.WAIT_EDGES_SECONDS),
              "waited:z", *(f"waited_over:{e:g}:z" for e in keys.WAIT_EDGES_SECONDS),
              "limited:q", "limited:z"]
    assert "waited_over:7.5:q" in keys.wait_fields("q")  # edges as written, not 7.50
    assert args == [2, len(fields), "list", "zset", *fields, "", "w1", "w2"]
    _, with_horizon = queueops.observe_call(schema, ["w1"], horizon_ms=1234)
    assert with_horizon == [2, len(fields), "list", "zset", *fields, 1234, "w1"]
