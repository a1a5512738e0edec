"""Who may see and act on which TaskQueue.

A `Viewer` answers, per namespace, whether it may see the TaskQueues there (`get taskqueues`)
and act on them (`update taskqueues`). Locally the one viewer is the person who started the
console: it sees everything and acts only with `--allow-actions`.
"""

from __future__ import annotations

import getpass
from typing import Protocol

from aiohttp import web


class Viewer(Protocol):
    @property
    def who(self) -> str:
        """The viewer's name, recorded with a pause (`taskqueue pause`'s record)."""
        ...

    async def may_see(self, namespace: str) -> bool: ...

    async def may_act(self, namespace: str) -> bool: ...


class Access(Protocol):
    async def viewer(self, request: web.Request) -> Viewer | None:
        """The request's viewer; None when nobody is signed in."""
        ...


class LocalViewer:
    """The local console's user."""

    def __init__(self, *, allow_actions: bool) -> None:
        self.allow_actions = allow_actions

    @property
    def who(self) -> str:
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "console"

    async def may_see(self, namespace: str) -> bool:
        return True

    async def may_act(self, namespace: str) -> bool:
        return self.allow_actions


class LocalAccess:
    def __init__(self, *, allow_actions: bool) -> None:
        self._viewer = LocalViewer(allow_actions=allow_actions)

    async def viewer(self, request: web.Request) -> Viewer | None:
        return self._viewer
