"""The console in the cluster: every TaskQueue the API server holds, and viewers who sign in
with a Kubernetes bearer token.

Sign-in: the token is checked with a TokenReview and kept server-side only (the browser holds a
random session id: HttpOnly, SameSite=Strict, `SESSION_SECONDS`). What a viewer may see and do is
a SubjectAccessReview per namespace, cached `REVIEW_SECONDS`: `get taskqueues` to see the
TaskQueues of a namespace, `update taskqueues` to act on them. The Redis URL of a TaskQueue is
its `spec.redis.url` or its Secret (`urlSecretRef`), read with the console's own account.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from taskqueue.api import manifest, redact
from taskqueue.cli.target import Target, from_object
from taskqueue.console.kube import Kube, User
from taskqueue.console.views import Hosted

if TYPE_CHECKING:
    import redis.asyncio as aioredis

SESSION_COOKIE = "tq_session"
SESSION_SECONDS = 8 * 3600.0
REVIEW_SECONDS = 30.0
"""How long an access review's answer is reused (a revoked grant takes effect within this)."""
LIST_SECONDS = 10.0
"""How long the list of TaskQueues is reused."""


@dataclass
class Session:
    user: User
    expires: float


class ClusterViewer:
    def __init__(self, *, kube: Kube, user: User, reviews: dict[tuple[str, str, str],
                                                                 tuple[bool, float]],
                 allow_actions: bool) -> None:
        self.kube, self.user, self._reviews = kube, user, reviews
        self.allow_actions = allow_actions

    async def _allowed(self, verb: str, namespace: str) -> bool:
        key = (self.user.name, verb, namespace)
        held = self._reviews.get(key)
        if held is not None and held[1] > time.monotonic():
            return held[0]
        ok = await asyncio.to_thread(self.kube.allowed, self.user, verb=verb,
                                     namespace=namespace)
        self._reviews[key] = (ok, time.monotonic() + REVIEW_SECONDS)
        return ok

    @property
    def who(self) -> str:
        return self.user.name

    async def may_see(self, namespace: str) -> bool:
        return await self._allowed("get", namespace)

    async def may_act(self, namespace: str) -> bool:
        return self.allow_actions and await self._allowed("update", namespace)


class ClusterAccess:
    """Sessions of signed-in viewers; `sign_in` checks a token."""

    def __init__(self, *, kube: Kube, allow_actions: bool) -> None:
        self.kube = kube
        self.allow_actions = allow_actions
        self._sessions: dict[str, Session] = {}
        self._reviews: dict[tuple[str, str, str], tuple[bool, float]] = {}

    async def viewer(self, request: web.Request) -> ClusterViewer | None:
        session = self._sessions.get(request.cookies.get(SESSION_COOKIE, ""))
        if session is None or session.expires < time.time():
            return None
        return ClusterViewer(kube=self.kube, user=session.user, reviews=self._reviews,
                             allow_actions=self.allow_actions)

    async def sign_in(self, token: str) -> str | None:
        """A new session id for `token`, None when the API server does not authenticate it."""
        user = await asyncio.to_thread(self.kube.review, token.strip())
        if user is None:
            return None
        sid = secrets.token_urlsafe(32)
        now = time.time()
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}
        self._sessions[sid] = Session(user=user, expires=now + SESSION_SECONDS)
        return sid

    def sign_out(self, sid: str) -> None:
        self._sessions.pop(sid, None)


class ClusterSource:
    """Every TaskQueue of the watched namespaces (all: the cluster's), listed at most every
    LIST_SECONDS."""

    def __init__(self, *, kube: Kube, namespaces: tuple[str, ...]) -> None:
        self.kube = kube
        self.namespaces = namespaces
        """The namespaces the operator watches (empty: all)."""
        self._listed: tuple[float, list[Hosted]] = (0.0, [])
        self._targets: dict[str, Target] = {}
        self._clients: dict[str, aioredis.Redis] = {}
        self.problems: dict[str, str] = {}
        """TaskQueues that could not be shown, and why (no secret in the text)."""

    async def taskqueues(self) -> list[Hosted]:
        at, hosted = self._listed
        if time.monotonic() - at < LIST_SECONDS:
            return hosted
        objs = await asyncio.to_thread(self.kube.taskqueues, self.namespaces)
        hosted = []
        for obj in objs:
            got = await asyncio.to_thread(self._hosted, obj)
            if got is not None:
                hosted.append(got)
        self._listed = (time.monotonic(), hosted)
        return hosted

    def _hosted(self, obj: dict[str, Any]) -> Hosted | None:
        meta = obj.get("metadata", {})
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        try:
            tq = manifest.parse(obj)
            url = tq.spec.redis.url or self._secret_url(tq)
            target = from_object(tq, url=url, given="spec.redis")
        except Exception as exc:  # one bad TaskQueue must not hide the others
            self.problems[ref] = redact.scrub(str(exc))[:300]
            return None
        self.problems.pop(ref, None)
        old = self._targets.get(ref)
        if old is None or old.redis_url != target.redis_url:
            self._targets[ref] = target
            self._clients[ref] = target.connect_async()
        assert target.schema is not None
        return Hosted(namespace=str(meta.get("namespace")), name=str(meta.get("name")),
                      schema=target.schema,
                      target_wait=dict(tq.spec.scaling.targetWaitSeconds or {}),
                      max_replicas=tq.spec.scaling.maxReplicas,
                      status=obj.get("status") or {}, schedules=tuple(tq.spec.schedules),
                      heartbeat_seconds=tq.spec.worker.heartbeatSeconds)

    def _secret_url(self, tq: Any) -> str:
        ref = tq.spec.redis.urlSecretRef
        value = self.kube.secret_value(tq.metadata.namespace, ref.name, ref.key)
        if value is None:
            raise ValueError(f"Secret {ref.name!r} has no key {ref.key!r}")
        return value

    def client(self, tq: Hosted) -> aioredis.Redis:
        return self._clients[tq.ref]

    def target(self, tq: Hosted) -> Target:
        return self._targets[tq.ref]

    async def close(self) -> None:
        for c in self._clients.values():
            await c.aclose()
