"""Handler adapters: a python function (sync or async, optional context) or a command per task.

`load()` resolves the handler once at start and raises `HandlerError` with a clear message when
it cannot be used, before the worker takes any task. Every adapter is called from a consume
thread as `run(payload, context)` and raises on failure (exception, non-zero exit, timeout).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from taskqueue.worker.running import NO_ID, Control

if TYPE_CHECKING:  # asyncio is imported when a coroutine handler first runs (start-up time)
    import asyncio


class HandlerError(Exception):
    """The configured handler cannot be used; the message says why and what to change."""


class TaskFailedError(Exception):
    """A task attempt failed without a Python exception (command exit code, timeout)."""


@dataclass(frozen=True, kw_only=True)
class TaskContext:
    """What a handler that takes a second argument learns about its task."""

    id: str
    """Task id from the envelope ('' for a raw LPUSH payload seen for the first time)."""
    queue: str
    """Key of the queue the task came from."""
    attempt: int
    """This attempt's number, 1 for the first."""
    enqueued_at: float | None = None
    """Unix time the producer enqueued it (envelopes only)."""
    traceparent: str = ""
    """The producer's W3C trace context from the envelope ("" when none)."""
    control: Control = field(default=NO_ID, repr=False, compare=False)
    """The worker's hold on the running task (cancel, progress)."""

    @property
    def cancelled(self) -> threading.Event:
        """Set when the task is cancelled (`taskqueue cancel`): a long handler checks it and
        returns early; whatever it then returns or raises, the task is not retried."""
        return self.control.event

    def progress(self, fraction: float | None = None, message: str = "") -> None:
        """Report how far the task is (`fraction` in [0, 1], clamped; a short `message`).
        Cheap: kept in memory, written to Redis at most once a second per worker (shown by
        `taskqueue status` and `taskqueue inflight`)."""
        self.control.report(fraction, message)


class Handler(Protocol):
    def __call__(self, payload: str, context: TaskContext) -> None: ...


def load(*, handler: str | None, command: tuple[str, ...] | None,
         timeout: float | None) -> Handler:
    """The adapter for spec.worker.handler or spec.worker.command."""
    if handler and command:
        raise HandlerError("set a handler or a command, not both")
    if command:
        return _command(command, timeout=timeout)
    if not handler:
        raise HandlerError(
            "no handler: set spec.worker.handler ('package.module:function') or "
            "spec.worker.command, or pass --handler / --command"
        )
    return _python(resolve(handler), timeout=timeout)


def resolve(spec: str) -> Callable[..., Any]:
    """The function named 'package.module:function'."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise HandlerError(f"handler {spec!r}: expected 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise HandlerError(
            f"handler {spec!r}: cannot import module {module_name!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    fn = getattr(module, attr, None)
    if fn is None:
        raise HandlerError(f"handler {spec!r}: module {module_name!r} has no {attr!r}")
    if not callable(fn):
        raise HandlerError(f"handler {spec!r}: {attr!r} is not callable")
    return fn  # type: ignore[no-any-return]


def _wants_context(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def _python(fn: Callable[..., Any], *, timeout: float | None) -> Handler:
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise HandlerError(
            f"handler {getattr(fn, '__qualname__', fn)!r} is a generator function: calling it "
            "would not run its body; make it return (or await) instead of yield"
        )
    with_ctx = _wants_context(fn)
    if inspect.iscoroutinefunction(fn):
        return AsyncHandler(fn, with_context=with_ctx, timeout=timeout)

    def call(payload: str, context: TaskContext) -> None:
        result = fn(payload, context) if with_ctx else fn(payload)
        settle(result, timeout=timeout)

    if timeout is None:
        return call

    def call_with_timeout(payload: str, context: TaskContext) -> None:
        _run_in_thread(call, payload, context, timeout=timeout)

    return call_with_timeout


def settle(result: object, *, timeout: float | None) -> None:
    """What a sync handler returned: an awaitable (an `async def` behind a plain decorator) is
    awaited on the shared event loop; a generator fails the task, since its body has not run
    and running it for the handler would guess at its meaning; anything else is success."""
    if result is None:  # what almost every handler returns: nothing to check
        return
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        if inspect.isgenerator(result):
            result.close()
        raise TaskFailedError(
            f"handler returned a {type(result).__name__} object, so its body never ran: "
            "return None, or iterate the generator inside the handler"
        )
    if inspect.isawaitable(result):
        run_awaitable(result, timeout=timeout)


def run_awaitable(awaitable: Awaitable[Any], *, timeout: float | None) -> None:
    """Await on the shared event loop from a consume thread; raises what the awaitable raised,
    TaskFailedError after `timeout` seconds."""
    import asyncio

    async def run() -> None:
        try:
            await asyncio.wait_for(awaitable, timeout)
        except TimeoutError:
            raise TaskFailedError(f"timed out after {timeout:g}s") from None

    asyncio.run_coroutine_threadsafe(run(), shared_loop()).result()


def _run_in_thread(fn: Handler, payload: str, context: TaskContext, *, timeout: float) -> None:
    """Run `fn` in a daemon thread; after `timeout` the attempt fails (the thread is left)."""
    box: list[BaseException | None] = []

    def target() -> None:
        try:
            fn(payload, context)
            box.append(None)
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True, name=f"task-{context.id}")
    thread.start()
    thread.join(timeout)
    if not box:
        raise TaskFailedError(f"timed out after {timeout:g}s")
    if box[0] is not None:
        raise box[0]


_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The event loop (one thread) that runs every coroutine handler of the process."""
    import asyncio

    global _loop, _loop_thread
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, daemon=True,
                                      name="async-handlers")
            thread.start()
            _loop, _loop_thread = loop, thread
        return _loop


def started_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread] | None:
    """The shared loop and its thread, once `shared_loop()` started them (the watchdog's)."""
    loop, thread = _loop, _loop_thread
    return None if loop is None or thread is None else (loop, thread)


class AsyncHandler:
    """A coroutine handler. The worker's async slots await `run()` on the shared event loop
    (no thread per slot); called from a thread, it runs there and waits for the result."""

    def __init__(self, fn: Callable[..., Coroutine[Any, Any, Any]], *, with_context: bool,
                 timeout: float | None) -> None:
        self._fn = fn
        self._with_context = with_context
        self._timeout = timeout

    def __call__(self, payload: str, context: TaskContext) -> None:
        coro = self._fn(payload, context) if self._with_context else self._fn(payload)
        run_awaitable(coro, timeout=self._timeout)

    async def run(self, payload: str, context: TaskContext) -> None:
        """Await the handler on the running loop; TaskFailedError after the timeout."""
        coro = self._fn(payload, context) if self._with_context else self._fn(payload)
        if self._timeout is None:
            await coro
            return
        # asyncio.timeout keeps the handler in the caller's task (wait_for would wrap it in a
        # task of its own, and a KeyboardInterrupt/SystemExit there would stop the loop)
        import asyncio

        try:
            async with asyncio.timeout(self._timeout):
                await coro
        except TimeoutError:
            raise TaskFailedError(f"timed out after {self._timeout:g}s") from None


CANCEL_GRACE_SECONDS = 10.0
"""A cancelled command's process group gets SIGTERM, then SIGKILL after this many seconds."""


def _command(argv: tuple[str, ...], *, timeout: float | None) -> Handler:
    exe = argv[0]
    if shutil.which(exe) is None:
        raise HandlerError(
            f"command {list(argv)!r}: {exe!r} is not an executable file or on PATH"
        )

    def run(payload: str, context: TaskContext) -> None:
        env = {**os.environ, "TASKQUEUE_TASK_ID": context.id,
               "TASKQUEUE_QUEUE": context.queue, "TASKQUEUE_ATTEMPT": str(context.attempt)}
        returncode, stderr = run_command(argv, stdin=payload.encode("utf-8", "surrogateescape"),
                                         env=env, timeout=timeout, control=context.control)
        if returncode != 0:
            tail = stderr.decode("utf-8", "replace").strip()[-500:]
            raise TaskFailedError(f"command exited with {returncode}: {tail}".rstrip(": "))

    return run


def run_command(argv: tuple[str, ...], *, stdin: bytes, env: dict[str, str],
                timeout: float | None, control: Control | None = None) -> tuple[int, bytes]:
    """Run `argv` in a process group of its own; (exit status, stderr). On timeout the whole
    group is killed (children the command started too), so nothing outlives the attempt or
    holds its pipes open. A cancel (`control`) sends the group SIGTERM, then SIGKILL after
    CANCEL_GRACE_SECONDS."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    if control is not None:
        control.on_cancel(lambda: _terminate_group(proc))
    try:
        _, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise TaskFailedError(f"command timed out after {timeout:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    return proc.returncode, err


def _terminate_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group; SIGKILL it if the command has not ended after
    CANCEL_GRACE_SECONDS (a timer thread, so the cancel returns at once)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)

    def kill_late() -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(CANCEL_GRACE_SECONDS, kill_late)
    timer.daemon = True
    timer.start()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (the command and every child it started that did
    not leave the group) and reap the command."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.communicate()
