"""How a worker takes and runs its tasks, decided once at start from its settings (pure).

`plan_for` answers, for the life of the process:
- the fetch mode: "held" (AtLeastOnce: fetch.lua moves each entry into the worker's processing
  list until it is acked), "unheld" (AtMostOnce over queues a blocking pop cannot serve: lists
  and zsets mixed, or starvation limits: fetch.lua hands entries out without holding them),
  "brpop" / "bzpopmin" (AtMostOnce, all lists / all zsets: each slot waits in a blocking pop;
  with spec.worker.tracking, "unheld" instead, since only fetch.lua writes the task index);
- whether entries are held (`held`): the one answer every slot, the dispatcher and the error
  policy read;
- what runs the tasks (`slots`) and so who fetches:
  - "threads": `concurrency` thread slots fed by the dispatcher (`dispatch.py`); the dispatcher
    thread fetches, or the last slot to become ready does it for all on its own thread;
  - "inline": concurrency 1, the one slot runs on the dispatcher thread, which alone fetches
    (no hand-over between threads per task);
  - "coroutines": a coroutine handler's slots are asyncio tasks on one event loop
    (`aslot.py`); the dispatcher thread fetches, or the loop does when its last coroutines
    running finish;
  - "blocking": thread slots, each popping for itself (no dispatcher, no wake-up listener).
  Whoever fetches for the dispatcher holds its one `dispatch.Fetcher` (one fetcher at a time by
  construction, not by convention);
- whether the idempotency steps run (`leases`): claim and complete are each slot's own Redis
  calls around its task, retried through outages, so an idempotent worker runs thread slots
  ("threads" even at concurrency 1 or with a coroutine handler, which its thread slots await);
- the long-lived threads the runner starts and watches (`threads`). Due retries and scheduled
  tasks are promoted by one of them alone, the promoter (`promoter.py`): no fetch promotes. The
  `flow` thread (`flowwatch.py`) runs for the blocking pops only (fetch.lua reads the flow
  hashes itself), and the watchdog (`watchdog.py`) from the start only when it has an event
  loop to watch: a coroutine handler with a task timeout (`watch_loop`). Other workers start
  it when they drain (a drain must end), so a worker that needs neither imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from taskqueue.wire.keys import KeySchema

FetchMode = Literal["held", "unheld", "brpop", "bzpopmin"]
Slots = Literal["threads", "inline", "coroutines", "blocking"]

FETCHERS: dict[Slots, tuple[str, ...]] = {
    "threads": ("dispatch", "the last slot to become ready"),
    "inline": ("dispatch",),
    "coroutines": ("dispatch", "the event loop when its last coroutines finish"),
    "blocking": ("each slot",),
}
"""Who may fetch, per kind of slots (one at a time: the holder of the dispatcher's Fetcher)."""
PERIODIC_THREADS = ("heartbeat", "lifecycle", "promoter")
"""The periodic threads every worker runs (`periodic.Periodic`; lifecycle: cancels and
progress). The blocking pops add `flow` (the pauses they leave out: `flowwatch`), a watched
event loop `watchdog`."""


class Settings(Protocol):
    """The settings a plan depends on (`config.WorkerConfig` has them)."""

    @property
    def delivery(self) -> str: ...
    @property
    def schema(self) -> KeySchema: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def idempotency_window(self) -> float | None: ...
    @property
    def tracking(self) -> bool: ...
    @property
    def task_timeout(self) -> float | None: ...


def fetch_mode(config: Settings) -> FetchMode:
    """How a worker with `config` takes its tasks."""
    if config.delivery == "AtLeastOnce":
        return "held"
    queues = config.schema.queues
    types = {q.type for q in queues}
    if len(types) > 1 or any(q.starvation_limit for q in queues) or config.tracking:
        return "unheld"
    return "bzpopmin" if types == {"zset"} else "brpop"


class Plan:
    """What `plan_for` decided (a plain class: a dataclass costs start-up time)."""

    __slots__ = ("concurrency", "fetch", "held", "leases", "loop", "slots", "watch_loop")

    def __init__(self, *, fetch: FetchMode, slots: Slots, leases: bool, loop: bool,
                 concurrency: int, watch_loop: bool) -> None:
        self.fetch: FetchMode = fetch
        self.held = fetch == "held"
        """Entries stay in the processing list until acked (AtLeastOnce)."""
        self.slots: Slots = slots
        self.leases = leases
        self.loop = loop
        """The handler is a coroutine: the event loop thread (`handlers.shared_loop`) runs it,
        started with the worker and watched like the others."""
        self.watch_loop = watch_loop and loop
        """The watchdog runs from the start: it ends the process when the handler holds the
        event loop past the task timeout. Without it the watchdog starts with the drain."""
        self.concurrency = concurrency

    @property
    def dispatched(self) -> bool:
        """A dispatcher fetches for the slots (with the wake-up listener for idle waits)."""
        return self.slots != "blocking"

    @property
    def fetchers(self) -> tuple[str, ...]:
        return FETCHERS[self.slots]

    @property
    def threads(self) -> tuple[str, ...]:
        """The names of the long-lived threads the runner starts and watches."""
        names = list(PERIODIC_THREADS)
        if not self.dispatched:
            names.append("flow")
        if self.watch_loop:
            names.append("watchdog")
        if self.leases:
            names.append("leases")
        if self.dispatched:
            names += ["wakeup", "dispatch"]
        if self.slots in ("threads", "blocking"):
            names += [f"slot-{i}" for i in range(self.concurrency)]
        if self.loop:
            names.append("async-handlers")
        return tuple(names)

    def describe(self) -> str:
        """One phrase for the start-up log line."""
        return (f"fetch {self.fetch} by {' or '.join(self.fetchers)}, {self.slots} slots"
                + (", idempotent" if self.leases else ""))

    def __repr__(self) -> str:
        return (f"Plan(fetch={self.fetch!r}, slots={self.slots!r}, leases={self.leases}, "
                f"loop={self.loop}, concurrency={self.concurrency}, "
                f"watch_loop={self.watch_loop})")


def plan_for(config: Settings, *, coroutine_handler: bool) -> Plan:
    """The plan of a worker with `config`; `coroutine_handler` when its handler is an
    `async def` (`handlers.AsyncHandler`). Pure."""
    fetch = fetch_mode(config)
    leases = config.idempotency_window is not None
    slots: Slots
    if fetch in ("brpop", "bzpopmin"):
        slots = "blocking"
    elif leases:
        slots = "threads"
    elif coroutine_handler:
        slots = "coroutines"
    elif config.concurrency == 1:
        slots = "inline"
    else:
        slots = "threads"
    return Plan(fetch=fetch, slots=slots, leases=leases, loop=coroutine_handler,
                concurrency=config.concurrency,
                watch_loop=coroutine_handler and config.task_timeout is not None)
