"""Every Redis key a TaskQueue owns is its own: a spec in which two names are one key (a queue
that is the dead-letter list, the delayed zset, a processing list...) is refused with one line
naming both and the fix, by the model, the worker's compiled settings and the CLI's flags."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest, workersettings
from taskqueue.wire import keys, keyspace
from taskqueue.worker import config as cfg


def spec(queues: list[str], **fields: Any) -> dict[str, Any]:
    return {"kind": "TaskQueue", "spec": {"redis": {"url": "redis://r:6379/0"},
                                          "queues": [{"key": k} for k in queues], **fields}}


# (queues, keyPrefix, deadLetterKey, what the one line must say)
COLLISIONS = [
    pytest.param(["q", "r"], None, "r",
                 "spec.queues[1].key 'r' is also spec.retry.deadLetterKey 'r': dead-letter "
                 "records would be taken as tasks and fail again; use another "
                 "spec.retry.deadLetterKey, e.g. 'q:dead'", id="the-issue-dead-letter-is-a-queue"),
    pytest.param(["q", "q:dead"], None, None,
                 "spec.queues[1].key 'q:dead' is the default dead-letter list of "
                 "spec.queues[0].key 'q'", id="queue-is-the-default-dead-letter"),
    pytest.param(["a", "b", "b:dead"], None, "a:failed",
                 "spec.queues[2].key 'b:dead' is the dead-letter name of spec.queues[1].key 'b'",
                 id="queue-is-another-queues-dead-name"),
    pytest.param(["q", "q:delayed"], None, None,
                 "spec.queues[1].key 'q:delayed' is <keyPrefix>:delayed, the TaskQueue's delayed "
                 "zset (retries and scheduled tasks) (spec.keyPrefix unset: the first queue key "
                 "'q'): rename the queue, or set spec.keyPrefix to another prefix",
                 id="queue-is-the-delayed-zset"),
    *(pytest.param(["q", f"jobs:{name}"], "jobs", None,
                   f"spec.queues[1].key 'jobs:{name}' is <keyPrefix>:{name}",
                   id=f"queue-is-{name}") for name in keyspace.BOOKKEEPING),
    *(pytest.param(["q", f"q:{name}:x1"], None, None,
                   f"spec.queues[1].key 'q:{name}:x1' is one of <keyPrefix>:{name}:<id>",
                   id=f"queue-in-{name}") for name in keyspace.FAMILIES),
    pytest.param(["q"], None, "q:stats",
                 "spec.retry.deadLetterKey 'q:stats' is <keyPrefix>:stats, the TaskQueue's stats "
                 "hash (spec.keyPrefix unset: the first queue key 'q'): use another "
                 "spec.retry.deadLetterKey, e.g. 'q:dead'", id="dead-letter-is-the-stats-hash"),
    pytest.param(["q"], "p", "p:processing:w1",
                 "spec.retry.deadLetterKey 'p:processing:w1' is one of <keyPrefix>:processing:<id>",
                 id="dead-letter-is-a-processing-list"),
    pytest.param(["{t}:q", "{t}:r"], None, "{t}:r", "spec.queues[1].key '{t}:r' is also "
                 "spec.retry.deadLetterKey '{t}:r'", id="hash-tagged-keys"),
]


@pytest.mark.parametrize("queues, prefix, dead, message", COLLISIONS)
def test_the_model_refuses_two_names_of_one_key(queues: list[str], prefix: str | None,
                                                dead: str | None, message: str) -> None:
    fields: dict[str, Any] = {"retry": {"deadLetterKey": dead}} if dead else {}
    if prefix:
        fields["keyPrefix"] = prefix
    with pytest.raises(manifest.ManifestError) as info:
        manifest.parse(spec(queues, **fields))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("queues, prefix, dead", [
    pytest.param(["q", "q:deadline"], None, None, id="dead-as-a-word-prefix"),
    pytest.param(["q", "q:processing"], None, None, id="a-family-name-without-an-id"),
    pytest.param(["q", "q:delayed2"], None, None, id="a-bookkeeping-name-plus-a-digit"),
    pytest.param(["q", "q:delayed"], "jobs", None, id="another-prefix-frees-the-name"),
    pytest.param(["q", "r"], None, "r:dead", id="a-dead-letter-list-of-its-own"),
    pytest.param(["a:dead:x", "a"], None, None, id="dead-inside-a-key"),
])
def test_near_misses_are_accepted(queues: list[str], prefix: str | None,
                                  dead: str | None) -> None:
    fields: dict[str, Any] = {"retry": {"deadLetterKey": dead}} if dead else {}
    if prefix:
        fields["keyPrefix"] = prefix
    manifest.parse(spec(queues, **fields))


def test_every_key_of_the_schema_is_one_keyspace_knows() -> None:
    schema = keys.KeySchema(prefix="p", queues=(keys.QueueRef("q"),), dead_letter="d")
    owned = [schema.workers, schema.delayed, schema.starvation, schema.stats, schema.quiesced,
             schema.processing("w"), schema.done("id"), schema.running("id"),
             schema.unique("id")]
    assert all(keyspace.owner(key, "p") for key in owned)
    assert keyspace.owner("q", "p") is None and keyspace.owner("d", "p") is None


def test_compiled_settings_with_a_collision_are_refused() -> None:
    """A worker pod's settings (written by an operator, or by hand) are checked the same way."""
    tq = manifest.parse(spec(["q", "r"]))
    data = workersettings.declare(tq.spec, tls_dir="/tls")
    data["keys"]["deadLetter"] = "r"
    declared = workersettings.read(data)
    with pytest.raises(ValueError) as info:
        cfg.from_declared(declared, worker_id="w")
    assert str(info.value).startswith(
        "spec.queues[1].key 'r' is also spec.retry.deadLetterKey 'r'")


def test_flag_labels_name_the_flags() -> None:
    line = keyspace.collision(["q", "r"], key_prefix=None, dead_letter="r",
                              labels=keyspace.FLAG_LABELS)
    assert line is not None and line.startswith("--queue 'r' is also --dead-letter-key 'r'")
