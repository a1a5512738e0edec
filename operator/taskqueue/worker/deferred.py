"""Start-up: defer the body of `redis.asyncio` until something uses it.

The worker talks to Redis without redis-py (`resp`); only Cluster and Sentinel topologies
import it, to find the master. redis-py's `redis/__init__.py` runs `from redis import asyncio`,
so every program that imports redis-py pays for the asyncio client (~43 ms of a ~250 ms worker
start on a quiet machine) even when, like the worker, it never makes one. `install()` (called
by the worker's entry point before anything imports redis) registers a finder that creates
`redis.asyncio` as a package whose `__path__` is set (its submodules import normally, e.g. the
`redis.asyncio.observability.recorder` that redis-py's sync command mixins import) but whose
`__init__.py` runs only on the first attribute lookup it cannot answer (`redis.asyncio.Redis`,
`from redis.asyncio import Redis`). A coroutine handler that uses redis.asyncio gets the real
module on first use.
"""

from __future__ import annotations

import importlib.machinery
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

DEFERRED = frozenset({"redis.asyncio"})


class _DeferredPackage(types.ModuleType):
    """A package module whose `__init__` runs on the first missing attribute."""

    def __getattr__(self, name: str) -> Any:
        loader = self.__dict__.get("_deferred_loader")
        if loader is None or name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        with _LOCK:
            if self.__dict__.pop("_deferred_loader", None) is not None:
                loader.exec_module(self)
        return object.__getattribute__(self, name)


_LOCK = threading.RLock()


class _DeferredLoader:
    """A loader (duck-typed: importlib.abc costs ~40 ms of start-up to import)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _DeferredPackage(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["_deferred_loader"] = self.real


class _Finder:
    """A meta path finder (duck-typed, as `_DeferredLoader`)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in DEFERRED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return None
        loader: Any = _DeferredLoader(spec.loader)  # a Loader in all but its base class
        spec.loader = loader
        return spec


_FINDER = _Finder()


def install() -> None:
    """Defer `DEFERRED` packages imported from now on (no effect on ones already imported)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
