"""The Redis key schema and the task envelope: one owner for both.

Every Redis key name this project reads or writes is built here (the Lua scripts in
`taskqueue/wire/lua/` are loaded by `taskqueue.wire.scripts`); the worker, the operator and the
CLI all import this module, so the two sides cannot drift apart. Pure: string building and
parsing only, no I/O.

Keys of one TaskQueue (prefix = spec.keyPrefix, default the first queue key; on a Redis Cluster
all of them share one {hash tag}, e.g. `{emails}:vip`, so they live in one slot):

| key                               | type   | holds                                               |
|-----------------------------------|--------|-----------------------------------------------------|
| <queue key> (each of spec.queues) | list   | tasks; producers LPUSH, the oldest is at the right  |
|                                   | zset   | tasks scored by priority, lowest first              |
| <prefix>:workers                  | zset   | worker id -> heartbeat deadline (unix ms)           |
| <prefix>:processing:<worker id>   | list   | entries the worker holds (in flight)                |
| <prefix>:delayed                  | zset   | entries waiting for a retry -> due time (unix ms)   |
| <prefix>:starvation               | hash   | queue key -> consecutive tasks taken from it        |
| <prefix>:stats                    | hash   | completed, failed, retried, dead, recovered counts  |
|                                   |        | (+ duplicates: redeliveries skipped as done,        |
|                                   |        | dead_trimmed: dead letters dropped by the cap)      |
|                                   |        | and taken:<queue key> (tasks fetch.lua took)        |
| <prefix>:quiesced                 | set    | processing-list keys of workers told to stop taking |
| <prefix>:flow                     | hash   | flow control: rate:, max:, paused:, paused-cli:<q>  |
| <prefix>:flowstate                | hash   | tat:<q> (rate limit), held:<q> (tasks in flight)    |
| <prefix>:history                  | stream | one point per spec.history.intervalSeconds          |
| <prefix>:decisions                | stream | one entry per change of the operator's decision     |
| <prefix>:schedules                | hash   | per schedule: slots accounted, last slot fired,     |
|                                   |        | its task, missed and skipped counts (fire.lua)      |
| <prefix>:fired:<task id>          | string | a schedule's slot was fired (SET NX, PX = window)   |
| <prefix>:done:<task id>           | string | idempotency: the task completed (PX = window)       |
| <prefix>:running:<task id>        | string | idempotency: worker id running it (PX = lease)      |
| <prefix>:unique:<task id>         | string | unique enqueue: the id was enqueued (PX = window)   |
| <prefix>:cancels                  | zset   | cancelled task id -> when the cancel expires (ms)   |
| <prefix>:task:<task id>           | hash   | task index (spec.worker.tracking): state, queue...  |
| <prefix>:progress:<worker id>     | hash   | task id -> its last progress report (JSON)          |
| <prefix>:started:<worker id>      | string | start times (unix ms) of the worker's running tasks |
|                                   |        | (heartbeat.lua; PX = its heartbeat deadline)        |
| <dead-letter key>                 | list   | JSON records of tasks that failed for good, newest  |
|                                   |        | first, at most spec.retry.deadLetterMaxLength       |

No two of these names may be one key (`taskqueue.wire.keyspace.collision`, checked by the models,
the worker's compiled settings and the CLI's flags); `keyspace` names the bookkeeping keys and
families this schema builds and owns their types (`KeySchema.type_of`, `expected_types`; a test
holds this table to it).

An *entry* (processing list, delayed set) is "<queue key>\\n<score>\\n<element>": the element as it
was in the queue plus where it came from (score is empty for lists), so any process can put it
back where it belongs. An *element* is either the producer's raw payload or an envelope written by
our client or by a retry: `{"__taskqueue__":1,"attempts":N,"enqueued_at":T,"id":"…","payload":…}`
with the keys in exactly that order, so Lua can read and bump the attempt count without decoding.
Producers in any language may write these formats; an element that starts like an envelope must
follow its rules (`unwrap`; the same checks in lua/lib/entry.lua), and every script checks an entry
before it writes (docs/worker.md, "Raw formats for producers in other languages").
Envelope ids (`new_task_id`) sort by creation time, so zset tasks of equal score come out FIFO.

The delayed zset also holds *scheduled* tasks (`enqueue(..., delay=/at=)`): same entry format,
scored by due time; promoted like retries.

Every dead-letter record is pushed by lua/lib/moves.lua `push_dead`, which trims the list to its
newest `KeySchema.dead_letter_max_length` records and counts the dropped ones in the stats field
DEAD_TRIMMED_FIELD.

Scripts (`scripts.lua(name)`): enqueue (unique / scheduled producer push), claim + complete + lease
(idempotent consumption), observe, recover (operator and worker), fetch (ack + promote + pick by
priority/starvation + move into the processing list), fail (retry or dead-letter), release (give
back unrun), heartbeat (refresh + list expired workers). docs/worker.md describes each.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskqueue.wire import keyspace
from taskqueue.wire.hashtag import cluster_key_problem

if TYPE_CHECKING:  # the worker reads key names without pydantic (start-up time)
    from taskqueue.api.models import QueueType, TaskQueueSpec

HEARTBEAT_DEADLINE_PERIODS = 3
"""A worker's deadline in the workers zset is its last beat plus this many of its heartbeat
periods (spec.worker.heartbeatSeconds): it is dead once they pass without a beat."""
STARTED_REPORTED = 32
"""A worker's heartbeat reports when its oldest this many running tasks started (`started`): the
operator counts the slots held by long tasks (`scaling.waitpolicy.held_after`)."""
TAKEN_FIELD_PREFIX = "taken:"
"""Stats-hash field prefix of the per-queue taken counters (the one name fetch.lua composes)."""
LIMITED_FIELD_PREFIX = "limited:"
"""Stats-hash field prefix of the tasks a queue's rate limit, in-flight limit or pause held back
from a fetch that could have taken them (fetch.lua; a task waiting through several fetches
counts in each)."""
SERVICE_MS_FIELD_PREFIX = "service_ms:"
"""Stats-hash field prefix of the milliseconds workers spent running each queue's tasks (every
attempt, success or failure); with SERVED_FIELD_PREFIX, the measured service time per queue.
Workers add their totals with each heartbeat (heartbeat.lua)."""
SERVED_FIELD_PREFIX = "served:"
"""Stats-hash field prefix of the attempts counted in SERVICE_MS_FIELD_PREFIX."""
SERVICE_SQ_FIELD_PREFIX = "service_sq_ms2:"
"""Stats-hash field prefix of the sum of the squared attempt times (ms^2, an integer: it holds
a million hour-long attempts before int64 overflows), for the service time's variance."""
SERVED_SQ_FIELD_PREFIX = "served_sq:"
"""Stats-hash field prefix of the attempts counted in SERVICE_SQ_FIELD_PREFIX (workers that do
not report squares count in `served:` only, so the variance stays right across an upgrade)."""

def service_fields(queue: str) -> tuple[str, str]:
    """The stats-hash fields of `queue`'s service milliseconds and attempts served."""
    return f"{SERVICE_MS_FIELD_PREFIX}{queue}", f"{SERVED_FIELD_PREFIX}{queue}"


def service_sq_fields(queue: str) -> tuple[str, str]:
    """The stats-hash fields of the sum of `queue`'s squared attempt times (ms^2) and of the
    attempts it counts."""
    return f"{SERVICE_SQ_FIELD_PREFIX}{queue}", f"{SERVED_SQ_FIELD_PREFIX}{queue}"


WAIT_EDGES_SECONDS = (0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0)
"""The wait histogram's edges: workers count, per queue, the tasks whose wait (enqueue to first
start, known from the envelope's `enqueued_at`) was longer than each edge, so the operator
knows the share of a queue's tasks that waited longer than its targetWaitSeconds (interpolated
between edges: `scaling.waits.Waits.late_share`)."""
WAITED_FIELD_PREFIX = "waited:"
"""Stats-hash field prefix of the tasks whose wait a worker measured (first attempts of
envelopes with an `enqueued_at`), per queue; added with each heartbeat."""
WAITED_OVER_FIELD_PREFIX = "waited_over:"
"""Stats-hash field prefix of the tasks of WAITED_FIELD_PREFIX that waited longer than an edge:
`waited_over:<edge seconds>:<queue>`."""


def edges_below(seconds: float) -> int:
    """How many edges of WAIT_EDGES_SECONDS a wait of `seconds` is longer than: it counts in
    the first that many `waited_over:` fields of `wait_fields` (after the count)."""
    return bisect.bisect_left(WAIT_EDGES_SECONDS, seconds)


def wait_fields(queue: str) -> tuple[str, ...]:
    """The stats-hash fields of `queue`'s measured waits: the count, then one per edge of
    WAIT_EDGES_SECONDS (the tasks that waited longer than it)."""
    return (f"{WAITED_FIELD_PREFIX}{queue}",
            *(f"{WAITED_OVER_FIELD_PREFIX}{edge:g}:{queue}" for edge in WAIT_EDGES_SECONDS))


OBSERVE_REPLY = ("lengths", "oldest", "counts", "workers", "queue_counters", "quiesced",
                 "scheduled", "wrong")
"""observe.lua's reply, in order: per-queue lengths and oldest envelope times, {delayed, dead,
completed, failed, dead trimmed}, flat (worker id, deadline ms, in flight, started)*, the
per-queue counters
(`KeySchema.queue_counter_fields`: taken, service ms, served, squared service ms, attempts
squared, then the wait histogram of each queue, then limited; "" when never written), the
quiesced processing keys, {due by the horizon, earliest due ms or "", duplicates,
cancelled}, then flat
(key, type held, type expected)* of the keys that hold another type (read as empty). One
EVALSHA."""

ENVELOPE_MARK = '{"__taskqueue__":1,"attempts":'
"""Every envelope starts with these characters; no other element is taken for one."""

DEAD_TRIMMED_FIELD = "dead_trimmed"
"""Stats-hash field counting the dead-letter records dropped to keep the list at its maximum
length (lua/lib/moves.lua `push_dead` writes it, observe.lua reads it: the name is
lua/lib/entry.lua's DEAD_TRIMMED)."""

DEAD_LETTER_MAX_LENGTH = 10_000
"""The newest records a dead-letter list keeps when no spec says (a `KeySchema` built without
one): the default of spec.retry.deadLetterMaxLength (`models.RetrySpec`, which this module
cannot import: the worker starts without pydantic)."""

_ATTEMPTS = re.compile(r"(0|[1-9][0-9]{0,8}),")
"""The attempt count right after ENVELOPE_MARK: an integer of at most 9 digits, no leading zero
(recover.lua rewrites it in place; lua/lib/entry.lua `read_envelope` checks the same)."""


_id_lock = threading.Lock()
_id_last = [0]
_id_node = os.urandom(3).hex()


def new_task_id() -> str:
    """A task id that sorts by creation time within a process (FIFO among equal zset scores).

    16 hex digits of nanoseconds (strictly increasing per process), then 6 random hex digits
    that keep ids of different processes apart.
    """
    with _id_lock:
        now = max(time.time_ns(), _id_last[0] + 1)
        _id_last[0] = now
    return f"{now:016x}{_id_node}"


@dataclass(frozen=True)
class QueueRef:
    """One queue of a TaskQueue, in priority order."""

    key: str
    type: QueueType = "list"
    starvation_limit: int | None = None


@dataclass(frozen=True)
class KeySchema:
    """All key names of one TaskQueue."""

    prefix: str
    queues: tuple[QueueRef, ...]
    dead_letter: str
    dead_letter_max_length: int = DEAD_LETTER_MAX_LENGTH
    """The newest records the dead-letter list keeps (spec.retry.deadLetterMaxLength)."""

    @classmethod
    def from_spec(cls, spec: TaskQueueSpec) -> KeySchema:
        return cls(
            prefix=spec.key_prefix,
            queues=tuple(
                QueueRef(key=q.key, type=q.type, starvation_limit=q.starvationLimit)
                for q in spec.queues
            ),
            dead_letter=spec.dead_letter_key,
            dead_letter_max_length=spec.retry.deadLetterMaxLength,
        )

    @property
    def workers(self) -> str:
        return keyspace.bookkeeping_key(self.prefix, "workers")

    @property
    def delayed(self) -> str:
        return keyspace.bookkeeping_key(self.prefix, "delayed")

    @property
    def starvation(self) -> str:
        return keyspace.bookkeeping_key(self.prefix, "starvation")

    @property
    def stats(self) -> str:
        return keyspace.bookkeeping_key(self.prefix, "stats")

    @property
    def quiesced(self) -> str:
        """Set of the processing-list keys of quiesced workers: fetch.lua gives them nothing."""
        return keyspace.bookkeeping_key(self.prefix, "quiesced")

    @property
    def flow(self) -> str:
        """Hash of the queues' flow control: rate and in-flight limits, pauses
        (`taskqueue.wire.flow`; fetch.lua reads it)."""
        return keyspace.bookkeeping_key(self.prefix, "flow")

    @property
    def flow_state(self) -> str:
        """Hash the scripts keep for flow control: rate-limit times and tasks in flight."""
        return keyspace.bookkeeping_key(self.prefix, "flowstate")

    @property
    def history(self) -> str:
        """Stream of the TaskQueue's history, one point per interval (`taskqueue.wire.history`)."""
        return keyspace.bookkeeping_key(self.prefix, "history")

    @property
    def decisions(self) -> str:
        """Stream of the operator's decision log, an entry per change (`taskqueue.wire.history`)."""
        return keyspace.bookkeeping_key(self.prefix, "decisions")

    @property
    def taken_fields(self) -> tuple[str, ...]:
        """The stats-hash fields counting the tasks taken from each queue (fetch.lua writes
        TAKEN_FIELD_PREFIX .. queue key)."""
        return tuple(f"{TAKEN_FIELD_PREFIX}{q.key}" for q in self.queues)

    @functools.cached_property
    def queue_counter_fields(self) -> tuple[str, ...]:
        """The per-queue stats-hash fields observe.lua reads: taken, service ms, served, squared
        service ms, attempts squared (N each, in queue order), then each queue's wait fields
        (`wait_fields`, len(WAIT_EDGES_SECONDS) + 1 per queue), then limited (N). Built once
        per schema (every poll sends them)."""
        return (*self.taken_fields,
                *(service_fields(q.key)[0] for q in self.queues),
                *(service_fields(q.key)[1] for q in self.queues),
                *(service_sq_fields(q.key)[0] for q in self.queues),
                *(service_sq_fields(q.key)[1] for q in self.queues),
                *(f for q in self.queues for f in wait_fields(q.key)),
                *(f"{LIMITED_FIELD_PREFIX}{q.key}" for q in self.queues))

    def worker_of(self, processing_key: str) -> str:
        """The worker id of a processing-list key."""
        return processing_key.removeprefix(self.processing_prefix)

    @property
    def processing_prefix(self) -> str:
        return keyspace.family_prefix(self.prefix, "processing")

    def processing(self, worker_id: str) -> str:
        return f"{self.processing_prefix}{worker_id}"

    def done(self, task_id: str) -> str:
        """Idempotency marker: `task_id` completed (expires after the window)."""
        return keyspace.family_prefix(self.prefix, "done") + task_id

    def running(self, task_id: str) -> str:
        """Idempotency lease: the worker id running `task_id` (expires with its heartbeat)."""
        return keyspace.family_prefix(self.prefix, "running") + task_id

    @property
    def schedules(self) -> str:
        """Hash of the schedules' firing: fields `<what>:<schedule name>` (fire.lua)."""
        return keyspace.bookkeeping_key(self.prefix, "schedules")

    def fired(self, task_id: str) -> str:
        """A schedule's slot whose task is `task_id` was fired (expires after the window)."""
        return keyspace.family_prefix(self.prefix, "fired") + task_id

    @property
    def cancels(self) -> str:
        """Zset of cancelled task ids -> when the cancel expires (unix ms): fetch.lua drops
        them, workers stop them (`taskqueue.wire.lifecycle`)."""
        return keyspace.bookkeeping_key(self.prefix, "cancels")

    @property
    def cancel_channel(self) -> str:
        """Pub/sub channel a cancel is published on (the id); every worker subscribes."""
        return f"{self.prefix}:cancel"

    @property
    def task_prefix(self) -> str:
        """The start of every task-index key (`task`)."""
        return keyspace.family_prefix(self.prefix, "task")

    def task(self, task_id: str) -> str:
        """Task index hash of `task_id` (spec.worker.tracking): state, queue, at, ..."""
        return self.task_prefix + task_id

    @property
    def progress_prefix(self) -> str:
        return keyspace.family_prefix(self.prefix, "progress")

    def progress(self, worker_id: str) -> str:
        """Hash of `worker_id`'s running tasks' last progress reports (task id -> JSON)."""
        return self.progress_prefix + worker_id

    def started(self, worker_id: str) -> str:
        """When `worker_id`'s running tasks started: "ms,ms,..." (Redis's clock, unix ms, oldest
        first, at most STARTED_REPORTED), written by its heartbeat with its deadline as TTL."""
        return keyspace.family_prefix(self.prefix, "started") + worker_id

    def unique(self, task_id: str) -> str:
        """Unique enqueue: `task_id` was enqueued (expires after `unique_for`)."""
        return keyspace.family_prefix(self.prefix, "unique") + task_id

    @property
    def queue_keys(self) -> tuple[str, ...]:
        return tuple(q.key for q in self.queues)

    @property
    def wakeup_keys(self) -> tuple[str, ...]:
        """The keys whose writes wake an idle worker: its queues, and the flow hashes (a resume,
        a limit raised, a task in flight given back elsewhere)."""
        return (*self.queue_keys, self.flow, self.flow_state)

    @property
    def queue_types(self) -> tuple[str, ...]:
        """The type of each queue, in the order of `queue_keys` (the scripts' queue ARGV)."""
        return tuple(q.type for q in self.queues)

    def cluster_problem(self) -> str | None:
        """Why these keys cannot share one Redis Cluster hash slot (None when they can): on a
        cluster every key of a TaskQueue carries the same {hash tag}, so each script is atomic
        on one node and different TaskQueues spread over the cluster."""
        return cluster_key_problem(list(self.queue_keys), key_prefix=self.prefix,
                                   dead_letter=self.dead_letter)

    def collision(self, *, labels: keyspace.Labels = keyspace.SPEC_LABELS) -> str | None:
        """Why two names of this TaskQueue are the same Redis key (`keyspace.collision`), None
        when every key is its own."""
        return keyspace.collision(self.queue_keys, key_prefix=self.prefix,
                                  dead_letter=self.dead_letter, labels=labels)

    def queue(self, key: str) -> QueueRef:
        for q in self.queues:
            if q.key == key:
                return q
        raise KeyError(key)

    def type_of(self, key: str) -> str | None:
        """The Redis type `key` holds when it is one of this TaskQueue's keys (a queue: its
        spec's type; the rest: `keyspace`), None when it is none of them."""
        for q in self.queues:
            if q.key == key:
                return q.type
        if key == self.dead_letter:
            return keyspace.DEAD_LETTER_TYPE
        return keyspace.owned_type(key, self.prefix)

    def expected_types(self, *, processing: Iterable[str] = ()) -> dict[str, str]:
        """The Redis type of every fixed key of this TaskQueue (the queues, the bookkeeping keys,
        the dead-letter list) and of the processing lists `processing`, in that order: what a
        WRONGTYPE check compares `TYPE key` with (a key that does not exist fits any)."""
        names = (*self.queue_keys, *(keyspace.bookkeeping_key(self.prefix, name)
                                     for name in keyspace.BOOKKEEPING),
                 self.dead_letter, *processing)
        return {key: kind for key in names if (kind := self.type_of(key)) is not None}


@dataclass(frozen=True)
class Entry:
    """A task as held in a processing list or the delayed set."""

    queue: str
    score: str
    element: str

    def encode(self) -> str:
        return f"{self.queue}\n{self.score}\n{self.element}"

    @classmethod
    def decode(cls, raw: str) -> Entry:
        """The entry `raw`; ValueError when it has no "<queue>\\n<score>\\n" header."""
        parts = raw.split("\n", 2)
        if len(parts) != 3:
            raise ValueError('not an entry "<queue>\\n<score>\\n<element>"')
        return cls(queue=parts[0], score=parts[1], element=parts[2])


@dataclass(frozen=True)
class Task:
    """An element unwrapped: the producer's payload and what we know about it."""

    payload: str
    attempts: int = 0
    """Attempts already made before this one (0 for a fresh task)."""
    id: str = ""
    enqueued_at: float | None = None
    enveloped: bool = False
    traceparent: str = ""
    """The producer's W3C trace context (`traceparent` header value), "" when none."""
    tracestate: str = ""
    problem: str = ""
    """Why the element cannot be run ("malformed envelope: ..."); the payload is then the whole
    element, and the worker dead-letters it unrun."""


def content_id(payload: str) -> str:
    """The id of a task that carries none: `sha1-<hex>` of the payload's bytes (same payload,
    same task; used by unique enqueue without an id and by idempotency for raw payloads)."""
    return "sha1-" + hashlib.sha1(payload.encode("utf-8", "surrogateescape")).hexdigest()


def task_identity(task: Task) -> str:
    """The id idempotency keys a task by: its envelope id, else the payload's `content_id`."""
    return task.id or content_id(task.payload)


def wrap(payload: str, *, attempts: int = 0, task_id: str | None = None,
         enqueued_at: float | None = None, traceparent: str = "", tracestate: str = "") -> str:
    """The envelope of `payload`, keys in the fixed order the Lua scripts rely on; the W3C
    trace context of the producer's span, when given, after the payload."""
    trace = ""
    if traceparent:
        trace = f",\"traceparent\":{json.dumps(traceparent)}"
        if tracestate:
            trace += f",\"tracestate\":{json.dumps(tracestate)}"
    return (
        f"{ENVELOPE_MARK}{attempts},\"enqueued_at\":{enqueued_at or time.time():.3f},"
        f"\"id\":{json.dumps(task_id or new_task_id())},"
        f"\"payload\":{json.dumps(payload, ensure_ascii=False)}{trace}}}"
    )


def unwrap(element: str) -> Task:
    """The payload inside `element`; a raw LPUSH payload is returned as it is. An element that
    starts with ENVELOPE_MARK but breaks an envelope rule (`_read_envelope`) is returned whole,
    with `problem` set. Never raises."""
    if not element.startswith(ENVELOPE_MARK):
        return Task(payload=element)
    data, problem = _read_envelope(element)
    if data is None:
        return Task(payload=element, problem=f"malformed envelope: {problem}")
    if "traceparent" not in data and "tracestate" not in data:  # no trace context: the usual
        return Task(payload=data["payload"], attempts=data["attempts"], id=data.get("id", ""),
                    enqueued_at=float(data["enqueued_at"]) or None, enveloped=True)
    return Task(payload=data["payload"], attempts=data["attempts"], id=data.get("id", ""),
                enqueued_at=float(data["enqueued_at"]) or None, enveloped=True,
                traceparent=_text_field(data, "traceparent"),
                tracestate=_text_field(data, "tracestate"))


def _text_field(data: dict[str, Any], name: str) -> str:
    """An optional string field of an envelope ("" when absent or not a string: a field the
    rules do not name never makes an envelope malformed)."""
    value = data.get(name, "")
    return value if isinstance(value, str) else ""


def _read_envelope(element: str) -> tuple[dict[str, Any] | None, str]:
    """The decoded envelope, or None and the rule `element` breaks. lua/lib/entry.lua
    `read_envelope` checks the same rules, in the same order, with the same words."""
    digits = _ATTEMPTS.match(element, len(ENVELOPE_MARK))
    if digits is None:
        return None, "attempts is not a count"
    try:
        data = json.loads(element)
    except (ValueError, RecursionError):
        return None, "not valid JSON"
    if not isinstance(data, dict):
        return None, "not valid JSON"
    attempts = data.get("attempts")
    if isinstance(attempts, bool) or attempts != int(digits.group(1)):
        return None, "attempts is not a count"
    if not isinstance(data.get("payload"), str):
        return None, "payload is not a string"
    if not isinstance(data.get("id", ""), str):
        return None, "id is not a string"
    if not _is_time(data.get("enqueued_at")):
        return None, "enqueued_at is not a time"
    return data, ""


def _is_time(value: Any) -> bool:
    """A finite number >= 0 (unix seconds; 0: unknown)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an integer too large for a float
        return False


def rewrap(task: Task, *, attempts: int) -> str:
    """The element that carries `task` again with a new attempt count."""
    return wrap(task.payload, attempts=attempts, task_id=task.id or None,
                enqueued_at=task.enqueued_at, traceparent=task.traceparent,
                tracestate=task.tracestate)


DEAD_LETTER_FIELDS = ("queue", "payload", "attempts", "error", "failed_at", "id")
"""The fields of a dead-letter record, in the order Python writes them (Lua's in any order)."""


def is_dead_letter_record(text: str) -> bool:
    """True when `text` is a dead-letter record: a JSON object with exactly DEAD_LETTER_FIELDS
    (in any order) and a string payload. The same rule as `is_dead_record` in lua/lib/entry.lua."""
    if not text.startswith("{"):
        return False
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return (isinstance(data, dict) and set(data) == set(DEAD_LETTER_FIELDS)
            and isinstance(data["payload"], str))


def dead_letter_record(*, entry: Entry, task: Task, attempts: int, error: str,
                       failed_at: float | None = None) -> str:
    """The JSON record pushed to the dead-letter list (same fields as recover.lua writes).

    A task whose payload is itself a dead-letter record (one pushed back into a queue by hand,
    or taken from a dead-letter list that is also a queue) goes to the list as that record,
    byte-exact: a record is never nested inside another one, so a record that fails again and
    again keeps its size (the failure is in the worker's log line)."""
    if is_dead_letter_record(task.payload):
        return task.payload
    return json.dumps(
        {
            "queue": entry.queue,
            "payload": task.payload,
            "attempts": attempts,
            "error": error,
            "failed_at": failed_at if failed_at is not None else time.time(),
            "id": task.id,
        },
        ensure_ascii=False,
    )
