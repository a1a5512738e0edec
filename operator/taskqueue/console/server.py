"""The console's web application (aiohttp): routes, page handlers, the actions.

Handlers read through the shared snapshot (`live.Shared`: one observe call per TaskQueue per
refresh interval whoever looks) and the bounded reads of `reads`; `views` turns what they read
into what the templates (Jinja2, autoescaped) show. Actions run the CLI's dead-letter code
(`taskqueue.cli.dlq`) in a thread, behind `access` and the CSRF checks of `security`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
import redis
from aiohttp import web

from taskqueue.api import redact
from taskqueue.cli import dlq
from taskqueue.cli.records import DeadLetter
from taskqueue.console import cluster, live, reads, security, views
from taskqueue.console.access import Access, Viewer
from taskqueue.console.source import Source
from taskqueue.redisio import flowops

READ_TIMEOUT = 10.0
"""Seconds a page waits for Redis."""
ACTIONS = ("requeue", "delete")

SOURCE = web.AppKey("source", Source)
ACCESS = web.AppKey("access", Access)
SHARED = web.AppKey("shared", live.Shared[live.Snapshot])
HELD = web.AppKey("held", live.Shared[live.Workers])
LISTED = web.AppKey("listed", live.Shared[live.Listed])
TEMPLATES = web.AppKey("templates", jinja2.Environment)
SETTINGS = web.AppKey("settings", dict[str, Any])
SIGNIN = web.AppKey("signin", cluster.ClusterAccess)
SLOTS = web.AppKey("slots", views.NextSlots)


def environment() -> jinja2.Environment:
    """The templates, every value escaped unless a template says otherwise (none does)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("taskqueue.console", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    return env


def render(request: web.Request, name: str, status: int = 200, **context: Any) -> web.Response:
    template = request.app[TEMPLATES].get_template(name)
    body = template.render(csrf=security.token(request), settings=request.app[SETTINGS],
                           **context)
    return web.Response(text=body, content_type="text/html", status=status)


async def _viewer(request: web.Request) -> Viewer:
    viewer = await request.app[ACCESS].viewer(request)
    if viewer is None:
        raise web.HTTPSeeOther("/signin")
    return viewer


async def _visible(request: web.Request, viewer: Viewer) -> list[views.Hosted]:
    return [tq for tq in await request.app[SOURCE].taskqueues()
            if await viewer.may_see(tq.namespace)]


async def _one(request: web.Request) -> tuple[Viewer, views.Hosted]:
    """The TaskQueue of the URL when this viewer may see it; 404 otherwise (whether it exists
    or not: a viewer learns nothing of a namespace it may not see)."""
    viewer = await _viewer(request)
    ns, name = request.match_info["namespace"], request.match_info["name"]
    if await viewer.may_see(ns):
        for tq in await request.app[SOURCE].taskqueues():
            if tq.namespace == ns and tq.name == name:
                return viewer, tq
    raise web.HTTPNotFound(text="no such TaskQueue here")


async def snapshot(request: web.Request, tq: views.Hosted) -> live.Snapshot:
    """The shared snapshot of `tq` (one refresh per TTL whoever asks)."""
    client = request.app[SOURCE].client(tq)

    async def load(previous: live.Snapshot | None) -> live.Snapshot:
        async with asyncio.timeout(READ_TIMEOUT):
            return await live.refresh(client, tq.schema, previous, now=time.time(),
                                      schedules=[sc.name for sc in tq.schedules])

    return await request.app[SHARED].get(tq.ref, load)


async def _rows(request: web.Request) -> tuple[list[dict[str, Any]], float]:
    """The list page's rows: each TaskQueue this viewer may see (the SubjectAccessReview per
    namespace), from its shared snapshot; and when the oldest of them was read."""
    viewer = await _viewer(request)
    tqs = await _visible(request, viewer)
    snaps = await asyncio.gather(*(snapshot(request, tq) for tq in tqs))
    rows = [views.summary(tq, s) for tq, s in zip(tqs, snaps, strict=True)]
    return rows, min((s.at for s in snaps), default=time.time())


async def index(request: web.Request) -> web.Response:
    rows, _ = await _rows(request)
    return render(request, "index.html", rows=rows)


async def index_data(request: web.Request) -> web.Response:
    """The live refresh of the list page: its table rendered again by the page's own partial
    from the shared snapshots, for the TaskQueues this viewer may see (as the page)."""
    rows, at = await _rows(request)
    table = request.app[TEMPLATES].get_template("partials/taskqueues.html").render(rows=rows)
    return web.json_response({"parts": {"taskqueues": table}, "at": at})


def _page(request: web.Request, name: str = "page") -> int:
    try:
        return max(0, int(request.query.get(name, "0")))
    except ValueError:
        return 0


async def workers_part(request: web.Request, tq: views.Hosted, snap: live.Snapshot,
                       page: int) -> dict[str, Any]:
    """Page `page` of the workers table: the snapshot's workers with the tasks they hold, read
    once per refresh interval per page whoever looks (`HELD`)."""
    wpage = views.worker_page(snap.observation, page, reads.WORKERS_PAGE)
    got = live.Workers(at=time.time())
    if wpage.ids:
        client = request.app[SOURCE].client(tq)

        async def load(previous: live.Workers | None) -> live.Workers:
            try:
                async with asyncio.timeout(READ_TIMEOUT):
                    return await live.read_workers(client, tq.schema, wpage.ids,
                                                   now=time.time())
            except TimeoutError:
                return live.Workers(at=time.time(), error="Redis did not answer in time")

        got = await request.app[HELD].get(f"{tq.ref} workers {wpage.page}", load)
    return {"workers": views.worker_rows(snap.observation, got.held, time.time(),
                                         tq.heartbeat_seconds, only=wpage.ids),
            "wpage": wpage.as_dict(), "workers_error": got.error,
            "workers_url": _url(tq) + "/workers"}


def _url(tq: views.Hosted) -> str:
    return f"/tq/{quote(tq.namespace, safe='')}/{quote(tq.name, safe='')}"


async def taskqueue(request: web.Request) -> web.Response:
    viewer, tq = await _one(request)
    snap = await snapshot(request, tq)
    now = time.time()
    return render(request, "taskqueue.html", tq=views.summary(tq, snap), error=snap.error,
                  decisions=views.decision_rows(snap.decisions, now),
                  schedules=views.schedule_rows(tq, snap.fired, now, request.app[SLOTS]),
                  fired_error=snap.fired_error,
                  **await workers_part(request, tq, snap, 0),
                  may_act=await viewer.may_act(tq.namespace))


async def workers(request: web.Request) -> web.Response:
    """The workers table a page at a time (`reads.WORKERS_PAGE` workers)."""
    _, tq = await _one(request)
    snap = await snapshot(request, tq)
    return render(request, "workers.html", tq=views.summary(tq, snap), error=snap.error,
                  **await workers_part(request, tq, snap, _page(request)))


PARTS = ("queues", "schedules", "workers", "lists")
"""The parts of a page data.json renders again (`?parts=`; the queues page's flow lines are in
`lists`)."""


async def _parts(request: web.Request, viewer: Viewer, tq: views.Hosted, snap: live.Snapshot,
                 summary: dict[str, Any]) -> dict[str, str]:
    """The page parts named in `?parts=`, rendered by the page's own partials from the shared
    snapshot (autoescaped as the page is)."""
    wanted = set(request.query.get("parts", "").split(","))
    now = time.time()
    env, base = request.app[TEMPLATES], {"csrf": security.token(request), "tq": summary}
    out = {}
    if "queues" in wanted:
        out["queues"] = env.get_template("partials/queues.html").render(
            **base, may_act=await viewer.may_act(tq.namespace))
    if "schedules" in wanted:
        out["schedules"] = env.get_template("partials/schedules.html").render(
            **base, schedules=views.schedule_rows(tq, snap.fired, now, request.app[SLOTS]),
            fired_error=snap.fired_error)
    if "workers" in wanted:
        out["workers"] = env.get_template("partials/workers.html").render(
            **base, **await workers_part(request, tq, snap, _page(request, "workers")))
    if "lists" in wanted:
        out["lists"] = env.get_template("partials/lists.html").render(
            **base, **await lists_part(request, tq, snap))
    return out


async def data(request: web.Request) -> web.Response:
    """The live refresh of a TaskQueue's pages: its numbers, chart series, decision log and the
    parts the page names (`?parts=queues,schedules,workers,lists`; `?workers=N`: the page of
    workers shown), all from the shared reads."""
    viewer, tq = await _one(request)
    snap = await snapshot(request, tq)
    summary = views.summary(tq, snap)
    return web.json_response({
        "summary": summary, "series": views.series(tq, snap.points),
        "decisions": views.decision_rows(snap.decisions, time.time()), "at": snap.at,
        "parts": await _parts(request, viewer, tq, snap, summary)})


async def _read(request: web.Request, tq: views.Hosted, read: Callable[[Any], Any]) -> Any:
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            return await read(request.app[SOURCE].client(tq))
    except (redis.RedisError, OSError, TimeoutError) as exc:
        raise web.HTTPServiceUnavailable(
            text=f"Redis could not be read: {redact.scrub(str(exc)) or type(exc).__name__}"
        ) from None


async def lists_part(request: web.Request, tq: views.Hosted, snap: live.Snapshot
                     ) -> dict[str, Any]:
    """The queues page's queues with their next tasks and the delayed entries due first, read
    once per refresh interval per TaskQueue whoever looks (`LISTED`)."""
    client = request.app[SOURCE].client(tq)

    async def load(previous: live.Listed | None) -> live.Listed:
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                return await live.read_lists(client, tq.schema, now=time.time())
        except TimeoutError:
            return live.Listed(at=time.time(), error="Redis did not answer in time")

    got = await request.app[LISTED].get(f"{tq.ref} queues", load)
    now = time.time()
    rows = views.queue_rows(tq, snap.observation, snap.flows)
    pending = got.pending or [[] for _ in tq.schema.queues]
    return {"queues": [{**rows[i], "key": q.key, "tasks": [views.task_row(p, now) for p in ps]}
                       for i, (q, ps) in enumerate(zip(tq.schema.queues, pending, strict=True))],
            "delayed": [views.task_row(p, now) for p in got.delayed],
            "lists_error": got.error, "shown": reads.PENDING_SHOWN}


async def queues(request: web.Request) -> web.Response:
    _, tq = await _one(request)
    snap = await snapshot(request, tq)
    now = time.time()
    return render(request, "queues.html", tq=views.summary(tq, snap),
                  **await lists_part(request, tq, snap),
                  schedules=views.schedule_rows(tq, snap.fired, now, request.app[SLOTS]),
                  fired_error=snap.fired_error)


async def dead(request: web.Request) -> web.Response:
    viewer, tq = await _one(request)
    text = request.query.get("q", "")
    page = _page(request)
    now = time.time()
    if text:
        total, searched, found = await _read(
            request, tq, lambda c: reads.dead_search(c, tq.schema, text))
        records, pages = found, 1
    else:
        total, records = await _read(request, tq,
                                     lambda c: reads.dead_page(c, tq.schema, page=page))
        searched, pages = 0, max(1, -(-total // reads.DEAD_PAGE))
    snap = await snapshot(request, tq)
    return render(request, "dead.html", tq=views.summary(tq, snap), q=text, page=page,
                  pages=pages, total=total, searched=searched, window=reads.SEARCH_WINDOW,
                  records=[views.dead_row(r, now) for r in records],
                  may_act=await viewer.may_act(tq.namespace))


async def _chosen(request: web.Request, tq: views.Hosted, form: dict[str, str]
                  ) -> list[DeadLetter]:
    """The records a form names: one digest, or the search `q` over the window."""
    if form.get("digest"):
        _, _, found = await _read(request, tq,
                                  lambda c: reads.dead_search(c, tq.schema, ""))
        return [r for r in found if reads.digest(r) == form["digest"]]
    _, _, found = await _read(request, tq,
                              lambda c: reads.dead_search(c, tq.schema, form.get("q", "")))
    return list(found)


async def _may_act(request: web.Request) -> tuple[views.Hosted, dict[str, str], str]:
    viewer, tq = await _one(request)
    if not await viewer.may_act(tq.namespace):
        raise web.HTTPForbidden(text=request.app[SETTINGS]["refusal"])
    form = await security.check_form(request)
    action = form.get("action", "")
    if action not in ACTIONS:
        raise web.HTTPBadRequest(text="action must be requeue or delete")
    return tq, form, action


async def confirm(request: web.Request) -> web.Response:
    """The confirmation page of an action: what it would touch, counted, and one button."""
    tq, form, action = await _may_act(request)
    chosen = await _chosen(request, tq, form)
    now = time.time()
    snap = await snapshot(request, tq)
    return render(request, "confirm.html", tq=views.summary(tq, snap), action=action,
                  records=[views.dead_row(r, now) for r in chosen[:reads.DEAD_PAGE]],
                  count=len(chosen), digests=" ".join(reads.digest(r) for r in chosen),
                  q=form.get("q", ""), window=reads.SEARCH_WINDOW)


async def act(request: web.Request) -> web.Response:
    """Requeue or delete exactly the confirmed records (those still in the searched window)."""
    tq, form, action = await _may_act(request)
    wanted = set(form.get("digests", "").split())
    source = request.app[SOURCE]
    target = source.target(tq)

    def pick(records: list[DeadLetter]) -> list[DeadLetter]:
        chosen, seen = [], set()
        for r in records:
            d = reads.digest(r)
            if d in wanted and d not in seen:
                seen.add(d)
                chosen.append(r)
        return chosen

    def run() -> tuple[int, list[str]]:
        client = target.connect()
        try:
            stop = reads.SEARCH_WINDOW - 1
            if action == "delete":
                return dlq.delete_picked(client, tq.schema.dead_letter, stop=stop, pick=pick), []
            moved, kept = dlq.requeue_picked(client, target, stop=stop, pick=pick)
            return moved, dlq.kept_lines(kept)
        finally:
            client.close()

    try:
        done, kept = await asyncio.to_thread(run)
    except redis.RedisError as exc:
        raise web.HTTPServiceUnavailable(text=f"Redis refused: {redact.scrub(str(exc))}") from None
    snap = await snapshot(request, tq)
    return render(request, "done.html", tq=views.summary(tq, snap), action=action, done=done,
                  kept=kept, missing=max(0, len(wanted) - done - len(kept)))


async def flow_action(request: web.Request) -> web.StreamResponse:
    """Pause or resume one queue: `taskqueue pause|resume`'s own field of the flow hash
    (`redisio.flowops`), recorded with the viewer's name; the same access and CSRF checks as
    the dead-letter actions. Resume lifts only that pause, never spec.queues[].paused."""
    viewer, tq = await _one(request)
    if not await viewer.may_act(tq.namespace):
        raise web.HTTPForbidden(text=request.app[SETTINGS]["refusal"])
    form = await security.check_form(request)
    action, queue = form.get("action", ""), form.get("queue", "")
    if action not in ("pause", "resume"):
        raise web.HTTPBadRequest(text="action must be pause or resume")
    if queue not in tq.schema.queue_keys:
        raise web.HTTPBadRequest(text=f"queue: {queue!r} is not a queue of this TaskQueue; "
                                      f"use one of {list(tq.schema.queue_keys)}")
    target = request.app[SOURCE].target(tq)

    def run() -> None:
        client = target.connect()
        try:
            if action == "pause":
                flowops.pause(client, tq.schema, queue, at=time.time(), who=viewer.who)
            else:
                flowops.resume(client, tq.schema, queue)
        finally:
            client.close()

    try:
        await asyncio.to_thread(run)
    except redis.RedisError as exc:
        raise web.HTTPServiceUnavailable(text=f"Redis refused: {redact.scrub(str(exc))}") from None
    request.app[SHARED].forget(tq.ref)
    raise web.HTTPSeeOther(_url(tq))


async def healthz(request: web.Request) -> web.Response:
    """The probes' endpoint: the process serves (no Redis, no API call)."""
    return web.Response(text="ok\n")


async def signin_page(request: web.Request) -> web.Response:
    return render(request, "signin.html", failed=False)


async def signin(request: web.Request) -> web.StreamResponse:
    """A Kubernetes bearer token in, a session cookie out (the token stays on the server)."""
    form = await security.check_form(request)
    sid = await request.app[SIGNIN].sign_in(form.get("token", ""))
    if sid is None:
        return render(request, "signin.html", status=401, failed=True)
    response = web.HTTPSeeOther("/")
    response.set_cookie(cluster.SESSION_COOKIE, sid, httponly=True, samesite="Strict",
                        path="/", secure=security.cookies_secure(request),
                        max_age=int(cluster.SESSION_SECONDS))
    return response


async def signout(request: web.Request) -> web.StreamResponse:
    await security.check_form(request)
    request.app[SIGNIN].sign_out(request.cookies.get(cluster.SESSION_COOKIE, ""))
    response = web.HTTPSeeOther("/signin")
    response.del_cookie(cluster.SESSION_COOKIE, path="/")
    return response


def build(*, source: Source, access: Access, refresh_seconds: float,
          refusal: str, mode: str,
          signin_access: cluster.ClusterAccess | None = None,
          secure_cookies: bool = False) -> web.Application:
    """The application; `refusal` is what a viewer who may not act is told; `secure_cookies`:
    a proxy in front serves the pages over HTTPS (cookies Secure, https:// origins accepted)."""
    app = web.Application(middlewares=[security.headers])
    app[security.SECURE_COOKIES] = secure_cookies
    app[SOURCE] = source
    app[ACCESS] = access
    app[SHARED] = live.Shared(ttl=refresh_seconds)
    app[HELD] = live.Shared(ttl=refresh_seconds)
    app[LISTED] = live.Shared(ttl=refresh_seconds)
    app[SLOTS] = views.NextSlots()
    app[TEMPLATES] = environment()
    app[SETTINGS] = {"refresh_ms": int(refresh_seconds * 1000), "refusal": refusal,
                     "mode": mode, "window": reads.SEARCH_WINDOW,
                     "signin": signin_access is not None}
    static = resources.files("taskqueue.console") / "static"
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", index)
    app.router.add_get("/data.json", index_data)
    app.router.add_get("/tq/{namespace}/{name}", taskqueue)
    app.router.add_get("/tq/{namespace}/{name}/data.json", data)
    app.router.add_get("/tq/{namespace}/{name}/queues", queues)
    app.router.add_get("/tq/{namespace}/{name}/workers", workers)
    app.router.add_get("/tq/{namespace}/{name}/dead", dead)
    app.router.add_post("/tq/{namespace}/{name}/dead/confirm", confirm)
    app.router.add_post("/tq/{namespace}/{name}/dead/act", act)
    app.router.add_post("/tq/{namespace}/{name}/flow", flow_action)
    app.router.add_static("/static/", str(static))
    if signin_access is not None:
        app[SIGNIN] = signin_access
        app.router.add_get("/signin", signin_page)
        app.router.add_post("/signin", signin)
        app.router.add_post("/signout", signout)

    async def close(app: web.Application) -> None:
        await app[SOURCE].close()

    app.on_cleanup.append(close)
    return app
