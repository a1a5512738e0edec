"""Handler adapters: a python function (sync or async, optional context) or a command per task.

`load()` resolves the handler once at start and raises `HandlerError` with a clear message when
it cannot be used, before the worker takes any task. Every adapter is called from a consume
thread as `run(payload, context)` and raises on failure (exception, non-zero exit, timeout).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol


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
    with_ctx = _wants_context(fn)
    if inspect.iscoroutinefunction(fn):
        return _AsyncHandler(fn, with_context=with_ctx, timeout=timeout)

    def call(payload: str, context: TaskContext) -> None:
        if with_ctx:
            fn(payload, context)
        else:
            fn(payload)

    if timeout is None:
        return call

    def call_with_timeout(payload: str, context: TaskContext) -> None:
        _run_in_thread(call, payload, context, timeout=timeout)

    return call_with_timeout


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


class _AsyncHandler:
    """Runs coroutine handlers on one event loop thread shared by all consume threads."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    def __init__(self, fn: Callable[..., Coroutine[Any, Any, Any]], *, with_context: bool,
                 timeout: float | None) -> None:
        self._fn = fn
        self._with_context = with_context
        self._timeout = timeout

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True,
                                 name="async-handlers").start()
                cls._loop = loop
            return cls._loop

    async def _run(self, payload: str, context: TaskContext) -> None:
        coro = self._fn(payload, context) if self._with_context else self._fn(payload)
        try:
            await asyncio.wait_for(coro, self._timeout)
        except TimeoutError:
            raise TaskFailedError(f"timed out after {self._timeout:g}s") from None

    def __call__(self, payload: str, context: TaskContext) -> None:
        asyncio.run_coroutine_threadsafe(self._run(payload, context), self.loop()).result()


def _command(argv: tuple[str, ...], *, timeout: float | None) -> Handler:
    exe = argv[0]
    if shutil.which(exe) is None:
        raise HandlerError(
            f"command {list(argv)!r}: {exe!r} is not an executable file or on PATH"
        )

    def run(payload: str, context: TaskContext) -> None:
        env = {**os.environ, "TASKQUEUE_TASK_ID": context.id,
               "TASKQUEUE_QUEUE": context.queue, "TASKQUEUE_ATTEMPT": str(context.attempt)}
        try:
            proc = subprocess.run(
                list(argv), input=payload.encode("utf-8", "surrogateescape"),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TaskFailedError(f"command timed out after {timeout:g}s") from None
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-500:]
            raise TaskFailedError(f"command exited with {proc.returncode}: {tail}".rstrip(": "))

    return run
