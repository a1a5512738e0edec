"""Raw Redis data a producer in another language (or a bug, or a person with redis-cli) may
leave in a TaskQueue's keys, as Hypothesis strategies, and the checks every fuzz test of it makes.

The TaskQueue of these tests (`SCHEMA`): list queue `q`, zset queue `z`, list queue `h` (whose
key a world may fill with another type), prefix `q`, dead-letter list `q:dead`. A `World` is
what is written before the run: queue elements, delayed entries "<queue>\\n<score>\\n<element>",
the processing list of a dead worker, dead-letter records, and keys of the wrong type. After
the run, `lost(world, after)` names every input no longer anywhere (handler output, a queue, the
delayed zset, a processing list, the dead-letter list), `type_changes` every key whose type
changed; docs/worker.md, "Raw formats for producers in other languages", says where each input
must go.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
from hypothesis import strategies as st

from taskqueue.wire import keys

MARK = keys.ENVELOPE_MARK.encode()
SCHEMA = keys.KeySchema(
    prefix="q", dead_letter="q:dead",
    queues=(keys.QueueRef(key="q"), keys.QueueRef(key="z", type="zset"), keys.QueueRef(key="h")))
DEAD_WORKER = "gone"
DONE = "fuzz:done"
"""The list the fuzz handler records each payload it ran in (`tests.redis.fuzz.handlers`)."""

ROLE_TYPES = {"q": "list", "z": "zset", "h": "list", SCHEMA.delayed: "zset",
              SCHEMA.dead_letter: "list", SCHEMA.stats: "hash", SCHEMA.workers: "zset",
              SCHEMA.starvation: "hash", SCHEMA.quiesced: "set", DONE: "list"}
"""The type each key of the TaskQueue holds when the project writes it (processing lists and
idempotency markers by family: `role_type`)."""

WRONG_TYPES = ("string", "hash", "set", "list", "zset")


def role_type(key: str) -> str | None:
    """The type the project writes `key` with; None for a key it never writes."""
    if key in ROLE_TYPES:
        return ROLE_TYPES[key]
    if key.startswith(SCHEMA.processing_prefix):
        return "list"
    if key.startswith(("q:done:", "q:running:", "q:unique:", SCHEMA.started(""))):
        return "string"
    return None


# --- elements: raw payloads and envelope look-alikes -------------------------------------

_JSON_VALUES = st.sampled_from([
    b"0", b"1", b"-1", b"1.5", b"1e999", b"-1e999", b"1e308", b"10" + b"0" * 400, b"true",
    b"false", b"null", b'"x"', b'""', b"[]", b"{}", b'{"a":1}', b'"\\ud800"', b'"\\u0000"',
    b'"\xff\xfe"', b"NaN", b"Infinity", b"01", b"0x10", b"1.", b".5"])
_ATTEMPTS = st.sampled_from([b"0", b"1", b"2", b"999999999", b"1000000000", b"01", b"-1",
                             b"1.5", b"1e2", b'"1"', b"true", b"null", b" 1", b""])
_ENQUEUED_AT = st.one_of(st.sampled_from([b"0", b"1767225600.5", b"-1", b"1e999", b'"x"',
                                          b"null", b"true", b"10" + b"0" * 400]),
                         _JSON_VALUES)
_STRING_PAYLOAD = st.text(max_size=12).map(lambda s: json.dumps(s).encode())


@st.composite
def envelope_like(draw: st.DrawFn) -> bytes:
    """An element that starts with the envelope mark: valid, or breaking one rule or more
    (fields of the wrong type, missing or repeated fields, truncated or trailing text, deep
    nesting)."""
    fields: list[bytes] = []
    if draw(st.booleans()):
        fields.append(b'"enqueued_at":' + draw(_ENQUEUED_AT))
    if draw(st.booleans()):
        fields.append(b'"id":' + draw(st.one_of(_STRING_PAYLOAD, _JSON_VALUES)))
    if draw(st.integers(0, 4)):
        fields.append(b'"payload":' + draw(st.one_of(_STRING_PAYLOAD, _JSON_VALUES)))
    if draw(st.integers(0, 5)) == 0:
        fields.append(b'"extra":' + draw(_JSON_VALUES))
    if draw(st.integers(0, 5)) == 0 and fields:  # a repeated field: the last one wins in JSON
        fields.append(draw(st.sampled_from(fields)))
    fields = draw(st.permutations(fields))
    text = MARK + draw(_ATTEMPTS) + b"".join(b"," + f for f in fields) + b"}"
    damage = draw(st.integers(0, 9))
    if damage == 0:
        text = text[:draw(st.integers(len(MARK), len(text)))]
    elif damage == 1:
        text += draw(st.sampled_from([b"x", b" ", b"}", b"\n", b"\x00"]))
    elif damage == 2:
        text = text[:-1] + b',"deep":' + b"[" * 3000 + b"]" * 3000 + b"}"
    return text


def valid_envelope(payload: str, *, task_id: str = "t1", attempts: int = 0) -> bytes:
    return keys.wrap(payload, attempts=attempts, task_id=task_id,
                     enqueued_at=1767225600.0).encode("utf-8", "surrogateescape")


RAW_PAYLOADS = st.one_of(
    st.binary(max_size=24),
    st.text(max_size=16).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"", b"\n", b"q\n\n", b"z\n7\nx", b"!", b"fail!", b"\xff", b"{}",
                     MARK, MARK[:-1], b" " + MARK + b'0,"enqueued_at":0,"payload":"p"}']),
)
"""Payloads as producers write them: any bytes (a '!' makes the fuzz handler fail them)."""

ELEMENTS = st.one_of(
    RAW_PAYLOADS, envelope_like(),
    st.builds(lambda p, a: valid_envelope(p, attempts=a),
              st.text(max_size=10), st.integers(0, 3)),
)
"""Queue elements: raw payloads, envelope look-alikes, valid envelopes."""

# --- entries: "<queue>\n<score>\n<element>" ------------------------------------------------

_QUEUES = st.sampled_from([b"q", b"z", b"h", b"", b"gone", b"Q", b"q ", b"q\r", b"z:dead"])
_SCORES = st.sampled_from([b"", b"7", b"-2.5", b"1e+20", b".5", b"inf", b"-inf", b"nan", b"abc",
                           b" 5", b"5 ", b"0x10", b"1e999", b"+3", b"1_0", b"-0", b"\xff"])


@st.composite
def entries(draw: st.DrawFn) -> bytes:
    """A delayed or processing entry, well-formed or not (fewer than two newlines, a queue the
    TaskQueue does not have, a score a list queue does not take or a zset queue cannot use)."""
    element = draw(ELEMENTS)
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return element.replace(b"\n", b"")
    if shape == 1:
        return draw(_QUEUES) + b"\n" + element.replace(b"\n", b"")
    return draw(_QUEUES) + b"\n" + draw(_SCORES) + b"\n" + element


def well_formed_entries() -> st.SearchStrategy[bytes]:
    """Entries a worker promotes or requeues as they are (list queue q, zset queue z)."""
    return st.one_of(st.builds(lambda e: b"q\n\n" + e, ELEMENTS),
                     st.builds(lambda s, e: b"z\n" + s + b"\n" + e,
                               st.sampled_from([b"1", b"-2.5", b"1e+20"]), ELEMENTS))


# --- dead-letter records -------------------------------------------------------------------

@st.composite
def dead_records(draw: st.DrawFn) -> bytes:
    """A dead-letter record: as the worker writes it, with fields of the wrong type or missing,
    or not JSON at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(RAW_PAYLOADS)
    record: dict[str, object] = {
        "queue": draw(st.sampled_from(["q", "z", "h", "", "gone", 5, None])),
        "payload": draw(st.one_of(st.text(max_size=10), st.sampled_from([None, 5, ["x"]]))),
        "attempts": draw(st.sampled_from([0, 3, -1, 1.5, "3", None, 10**30])),
        "error": draw(st.sampled_from(["boom", "", None, 7])),
        "failed_at": draw(st.sampled_from([1767225600.0, 0, -5, "x", None])),
        "id": draw(st.sampled_from(["t1", "", None, 9, "sha1-00"])),
    }
    for name in draw(st.lists(st.sampled_from(sorted(record)), max_size=2)):
        record.pop(name, None)
    return json.dumps(record).encode()


# --- a world ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class World:
    """What a test writes into Redis before the run (see the module docstring)."""

    q: tuple[bytes, ...] = ()
    z: tuple[tuple[bytes, float], ...] = ()
    h_type: str = "none"
    """The type key `h` holds: "none", "list" (h's elements: `h`) or another type."""
    h: tuple[bytes, ...] = ()
    delayed: tuple[tuple[bytes, int], ...] = ()
    """(entry, due offset in ms from now: negative is due)."""
    processing: tuple[bytes, ...] = ()
    """The entries in the processing list of the dead worker DEAD_WORKER."""
    dead: tuple[bytes, ...] = ()
    wrong: tuple[tuple[str, str], ...] = ()
    """Bookkeeping keys written with another type than theirs: (key, type)."""
    stats: tuple[tuple[bytes, bytes], ...] = ()
    """Fields of the stats hash, counters with any value."""
    workers: tuple[tuple[bytes, float], ...] = ()
    """Members of the workers zset (id, heartbeat deadline) besides DEAD_WORKER."""
    quiesced: tuple[bytes, ...] = ()

    def inputs(self) -> Iterator[tuple[str, bytes, frozenset[str]]]:
        """(where it was written, the input, the forms in which it may be found afterwards)."""
        for e in self.q:
            yield "q", e, element_forms(e)
        for e, _ in self.z:
            yield "z", e, element_forms(e)
        for e in self.h:
            yield "h", e, element_forms(e)
        for e, _ in self.delayed:
            yield "delayed", e, entry_forms(e)
        for e in self.processing:
            yield "processing", e, entry_forms(e)
        for e in self.dead:
            yield "dead", e, frozenset(_record_forms(e))


def _wrong_type(right: str) -> st.SearchStrategy[str]:
    return st.sampled_from([t for t in WRONG_TYPES if t != right])


BOOKKEEPING = (SCHEMA.delayed, SCHEMA.stats, SCHEMA.workers, SCHEMA.starvation, SCHEMA.quiesced,
               SCHEMA.dead_letter, SCHEMA.processing(DEAD_WORKER))


_COUNTER_FIELDS = st.sampled_from([
    b"completed", b"failed", b"dead", b"duplicates", b"dead_trimmed", b"taken:q", b"taken:z",
    b"service_ms:q", b"served:q", b"service_sq_ms2:q", b"served_sq:q", b"waited:q",
    b"waited_over:0.5:q", b"waited_over:300:z"])
_COUNTER_VALUES = st.sampled_from([b"0", b"7", b"-3", b"1.5", b"abc", b"", b"1e999", b"inf",
                                   b"nan", b"99999999999999999999", b"\xff"])
_WORKER_IDS = st.one_of(st.sampled_from([b"w2", b"", b"w\n1", b"\xff", b"q:processing:w"]),
                        st.binary(max_size=8))
_DEADLINES = st.sampled_from([0.0, 1.0, -1.0, 4e12, float("inf"), float("-inf"), 1e300])


@st.composite
def worlds(draw: st.DrawFn, *, wrong_bookkeeping: bool = True) -> World:
    """A World: a few of each kind of input, and sometimes a key of the wrong type."""
    h_type = draw(st.sampled_from(["none", "list", "hash", "string", "set", "zset"]))
    wrong: list[tuple[str, str]] = []
    if wrong_bookkeeping and draw(st.integers(0, 3)) == 0:
        key = draw(st.sampled_from(BOOKKEEPING))
        wrong.append((key, draw(_wrong_type(role_type(key) or ""))))
    small = {"max_size": 4}
    return World(
        q=tuple(draw(st.lists(ELEMENTS, **small))),
        z=tuple(draw(st.lists(st.tuples(ELEMENTS, st.sampled_from([0.0, -1.5, 7.0, 1e20])),
                              unique_by=lambda p: p[0], **small))),
        h_type=h_type,
        h=tuple(draw(st.lists(ELEMENTS, **small))) if h_type == "list" else (),
        delayed=tuple(draw(st.lists(st.tuples(entries(), st.sampled_from([-5000, -1, 600_000])),
                                    unique_by=lambda p: p[0], **small))),
        processing=tuple(draw(st.lists(entries(), **small))),
        dead=tuple(draw(st.lists(dead_records(), max_size=3))),
        wrong=tuple(wrong),
        stats=tuple(draw(st.lists(st.tuples(_COUNTER_FIELDS, _COUNTER_VALUES), max_size=3))),
        workers=tuple(draw(st.lists(st.tuples(_WORKER_IDS, _DEADLINES), max_size=2,
                                    unique_by=lambda w: w[0]))),
        quiesced=tuple(draw(st.lists(st.one_of(_WORKER_IDS, st.just(
            SCHEMA.processing("w2").encode())), max_size=2))),
    )


def write(r: redis.Redis, world: World, *, now_ms: int) -> None:
    """Write `world` into a flushed Redis (`r` speaks bytes)."""
    wrong = dict(world.wrong)
    for key, kind in wrong.items():
        _fill(key, kind, r)
    if world.h_type not in ("none", "list"):
        _fill("h", world.h_type, r)
    workers = {w: score for w, score in world.workers if w != DEAD_WORKER.encode()}
    if registers_dead_worker(world):
        workers[DEAD_WORKER.encode()] = 1
    plan: list[tuple[str, Any, Callable[[str, Any], object]]] = [
        ("q", world.q, lambda k, v: r.lpush(k, *v)),
        ("z", world.z, lambda k, v: r.zadd(k, dict(v))),
        ("h", world.h, lambda k, v: r.lpush(k, *v)),
        (SCHEMA.delayed, [(e, now_ms + offset) for e, offset in world.delayed],
         lambda k, v: r.zadd(k, dict(v))),
        (SCHEMA.processing(DEAD_WORKER), world.processing, lambda k, v: r.rpush(k, *v)),
        (SCHEMA.dead_letter, world.dead, lambda k, v: r.lpush(k, *v)),
        (SCHEMA.stats, world.stats, lambda k, v: r.hset(k, mapping=dict(v))),
        (SCHEMA.workers, workers, lambda k, v: r.zadd(k, v)),
        (SCHEMA.quiesced, world.quiesced, lambda k, v: r.sadd(k, *v)),
    ]
    for key, values, put in plan:
        if values and key not in wrong:
            put(key, values)


def registers_dead_worker(world: World) -> bool:
    """Whether `write` registers DEAD_WORKER (expired) in the workers zset: when it has a
    processing list, of entries or of the wrong type."""
    wrong = dict(world.wrong)
    return SCHEMA.workers not in wrong and bool(
        world.processing or SCHEMA.processing(DEAD_WORKER) in wrong)


def _fill(key: str, kind: str, r: redis.Redis) -> None:
    """A key of type `kind` holding one marker value."""
    value = b"wrong-type " + key.encode()
    {"string": lambda: r.set(key, value), "hash": lambda: r.hset(key, "f", value),
     "set": lambda: r.sadd(key, value), "list": lambda: r.rpush(key, value),
     "zset": lambda: r.zadd(key, {value: 1})}[kind]()


def effective(world: World) -> World:
    """`world` without the inputs `write` could not write (their key holds the wrong type)."""
    wrong = dict(world.wrong)
    return World(
        q=world.q, z=world.z, h_type=world.h_type, h=world.h,
        delayed=() if SCHEMA.delayed in wrong else world.delayed,
        processing=() if SCHEMA.processing(DEAD_WORKER) in wrong else world.processing,
        dead=() if SCHEMA.dead_letter in wrong else world.dead,
        wrong=world.wrong, stats=world.stats, workers=world.workers, quiesced=world.quiesced)


# --- where an input may be found ---------------------------------------------------------------

def text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def element_forms(element: bytes) -> frozenset[str]:
    """An element as it may be found: itself, or its payload (as a handler got it, or wrapped
    in a retry's envelope or a dead-letter record)."""
    whole = text(element)
    return frozenset({whole, keys.unwrap(whole).payload})


def entry_forms(entry: bytes) -> frozenset[str]:
    """An entry as it may be found: itself, or its element's forms (an entry without a header
    is dead-lettered as one element: whole, or the payload of the envelope it is)."""
    parts = entry.split(b"\n", 2)
    return element_forms(entry) | (element_forms(parts[2]) if len(parts) == 3 else set())


@dataclass
class Found:
    """Everything in Redis after a run, as places that each hold one input."""

    places: list[tuple[str, frozenset[str]]] = field(default_factory=list)

    def add(self, where: str, forms: Iterable[str]) -> None:
        self.places.append((where, frozenset(forms)))


def _record_forms(record: bytes) -> set[str]:
    """A dead-letter record as it may be found: itself, or its payload (requeued)."""
    forms = {text(record)}
    try:
        data = json.loads(text(record))
    except ValueError:
        return forms
    payload = data.get("payload") if isinstance(data, dict) else None
    if isinstance(payload, str):
        forms |= {payload, keys.unwrap(payload).payload}
    return forms


def found(r: redis.Redis) -> Found:
    """Every place an input may be in after a run: the fuzz handler's output, the queues, the
    delayed zset, every processing list, the dead-letter list."""
    out = Found()
    for done in _list(r, DONE):
        out.add("done", {json.loads(done)})
    for key in ("q", "h"):
        for e in _list(r, key):
            out.add(key, element_forms(e))
    for e in _zset(r, "z"):
        out.add("z", element_forms(e))
    for e in _zset(r, SCHEMA.delayed):
        out.add("delayed", entry_forms(e))
    for key in r.scan_iter(match=SCHEMA.processing_prefix.encode() + b"*"):
        for e in _list(r, key.decode()):
            out.add(key.decode(), entry_forms(e))
    for record in _list(r, SCHEMA.dead_letter):
        out.add("dead", _record_forms(record))
    return out


def _list(r: redis.Redis, key: str) -> list[bytes]:
    return list(r.lrange(key, 0, -1)) if r.type(key) == b"list" else []


def _zset(r: redis.Redis, key: str) -> list[bytes]:
    return list(r.zrange(key, 0, -1)) if r.type(key) == b"zset" else []


def lost(world: World, after: Found) -> list[tuple[str, bytes]]:
    """The inputs of `world` that no place of `after` holds: each place holds at most one input
    (a maximum bipartite matching of inputs to places whose forms meet)."""
    inputs = _one_per_zset_element(list(world.inputs()))
    owner: dict[int, int] = {}

    def place_for(i: int, seen: set[int]) -> bool:
        for p, (_, forms) in enumerate(after.places):
            if p in seen or not forms & inputs[i][2]:
                continue
            seen.add(p)
            if p not in owner or place_for(owner[p], seen):
                owner[p] = i
                return True
        return False

    return [(where, data) for i, (where, data, _) in enumerate(inputs)
            if not place_for(i, set())]


Input = tuple[str, bytes, frozenset[str]]


def _one_per_zset_element(inputs: list[Input]) -> list[Input]:
    """`inputs` with one of each group that becomes one element of the zset queue z: a zset
    holds an element once, so two entries of one element put back there, or two dead-letter
    records of one task requeued there, are one task."""
    seen: set[object] = set()
    kept = []
    for item in inputs:
        key = _zset_element(item[0], item[1])
        if key is None or key not in seen:
            kept.append(item)
        if key is not None:
            seen.add(key)
    return kept


def _zset_element(where: str, data: bytes) -> object:
    if where in ("delayed", "processing"):
        parts = data.split(b"\n", 2)
        return ("z", parts[2]) if len(parts) == 3 and parts[0] == b"z" else None
    if where == "dead":
        try:
            record = json.loads(text(data))
        except ValueError:
            return None
        if isinstance(record, dict) and record.get("queue") == "z":
            return ("z-record", str(record.get("payload")), str(record.get("id")))
    return None


def key_types(r: redis.Redis) -> dict[str, str]:
    """TYPE of every key."""
    return {k.decode(): r.type(k).decode() for k in r.scan_iter(count=1000)}


def type_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Keys whose type changed (a key that emptied and vanished did not), and new keys of
    another type than the project writes them with."""
    changed = [f"{k}: {t} -> {after[k]}" for k, t in before.items()
               if after.get(k, "none") not in (t, "none")]
    new = [f"{k}: new {t}, expected {role_type(k)}" for k, t in after.items()
           if k not in before and t != role_type(k)]
    return changed + new


def dump(r: redis.Redis) -> dict[str, object]:
    """Every key's type and content (to compare a read-only command's before and after)."""
    out: dict[str, object] = {}
    for k in sorted(r.scan_iter(count=1000)):
        kind = r.type(k).decode()
        if kind == "none":  # gone since the scan
            continue
        out[k.decode()] = (kind, {
            "string": lambda k=k: r.get(k), "list": lambda k=k: r.lrange(k, 0, -1),
            "hash": lambda k=k: r.hgetall(k), "set": lambda k=k: sorted(r.smembers(k)),
            "zset": lambda k=k: r.zrange(k, 0, -1, withscores=True),
        }[kind]())
    return out
