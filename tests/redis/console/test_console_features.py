"""The console shows what flow control, schedules and task progress put in Redis, in a real
Chromium, with every record written by its real code path: the operator's flow sync
(`flowops.sync`) and `taskqueue pause` (the CLI program), the operator's fire.lua call for the
schedules (its own plan), a real worker whose handler reports `ctx.progress` while it runs.

Specs: a queue's rate limit, its in-flight count against maxInFlight and who paused it show in
the queues table (and the list page says paused); each schedule shows its next slot, the last
slot fired with its task id as Redis records it, a due slot not fired as late, and missed slots;
a running task shows its progress; a queue is paused and resumed from the page as `taskqueue
pause|resume` does (read-only: no button, a forged POST refused); all of it under exactly the
console's ACL rule.
Live refresh: the list page follows a new task (backlog) and a CLI pause without a reload,
twenty viewers of it cost one refresh per TaskQueue; without a reload, a running task's progress
bar moves, a fired schedule's row, a pause and a new limit show (the TaskQueue page), the queues
page's flow lines and task lists follow; twenty viewers at once cost one observe call and one
read of the held tasks (of the task lists, on the queues page). Two hundred and thirty
workers come a page of `reads.WORKERS_PAGE` at a time.
Screenshots: docs/images/console-flow-schedules-progress.png, docs/images/console-workers.png.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import subprocess
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aioredis
from playwright.sync_api import expect

from taskqueue import client
from taskqueue.api import manifest as manifests
from taskqueue.api import schedulespec
from taskqueue.console import reads
from taskqueue.controller import schedules
from taskqueue.redisio import acl, flowops, queueops
from taskqueue.wire import flow, keys, lifecycle
from tests.helpers import handlers
from tests.helpers.browser import SCREENSHOTS, Browser, console_process
from tests.helpers.cli import console_script

NAME = "/tq/media/thumbs"
QUEUES = [{"key": "vip", "maxInFlight": 4, "rateLimit": {"tasks": 50, "perSeconds": 1,
                                                          "burst": 5}},
          {"key": "normal"}]
# the scheduled tasks are "quick" for the test handler: they never hold the one slot
SCHEDULES = [
    {"name": "report", "cron": "* * * * *", "queue": "normal", "payload": "quick"},
    # fired last 10 minutes ago: its slots since then are due and not fired
    {"name": "stalled", "cron": "*/2 * * * *", "queue": "normal", "payload": "quick",
     "catchUpSeconds": 60},
]
T = TypeVar("T")


def in_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run an asyncio call on a thread of its own (Playwright's sync API holds this thread's
    event loop while the browser is open)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result(timeout=60)


@pytest.fixture
def manifest(tmp_path: Path, redis_url: str) -> str:
    doc = {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
           "metadata": {"name": "thumbs", "namespace": "media"},
           "spec": {"redis": {"url": redis_url}, "queues": QUEUES, "schedules": SCHEDULES}}
    path = tmp_path / "taskqueue.yaml"
    path.write_text(json.dumps(doc))
    return str(path)


async def _fire(r: aioredis.Redis, path: str, *, now: float,
                seen: dict[str, int | None]) -> dict[str, int | None]:
    spec = manifests.load(path).spec
    schema = keys.KeySchema.from_spec(spec)
    plans = schedules.plan(spec, schema, seen=seen, now=now, horizon=90)
    keys_, args = schedules.call(schema, plans)
    reply = await queueops.script("fire")(r, keys=queueops.wire(keys_), args=queueops.wire(args))
    return schedules.seen_after(schedules.parse(reply, plans))


async def operator_poll(redis_url: str, path: str, *, now: float,
                        seen: dict[str, int | None] | None = None) -> dict[str, int | None]:
    """What the operator's poll at `now` writes: the spec's flow control into the flow hash,
    and the schedules' due slots fired by fire.lua from its own plan (a first call learns what
    Redis holds, as the operator's first poll does); returns `through` as Redis then holds it.
    A schedule whose `seen` is None is left alone when Redis knows it."""
    spec = manifests.load(path).spec
    schema = keys.KeySchema.from_spec(spec)
    r = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        await flowops.sync(r, schema, flow.declared(spec.queues))
        if seen is None:
            seen = await _fire(r, path, now=now, seen={s.name: None for s in spec.schedules})
        return await _fire(r, path, now=now, seen=seen)
    finally:
        await r.aclose()


@pytest.fixture
def running_task(redis_url: str, redis_sync: redis.Redis, make_worker: Any, handler_env: None,
                 manifest: str) -> Iterator[str]:
    """A task of vip running on worker w1 (the flow control synced first, as the operator does
    before workers start), its handler reporting 25 % "a quarter"; cancelled after the test
    (the handler waits for it)."""
    in_thread(lambda: operator_poll(redis_url, manifest, now=time.time() - 600))
    make_worker(handler="tests.helpers.handlers:until_cancelled", queues=QUEUES)
    task_id = client.enqueue_sync(redis_sync, "vip", "long", task_id="long-1")
    deadline = time.monotonic() + 60
    while not redis_sync.hget("vip:progress:w1", task_id):
        assert time.monotonic() < deadline, "the task never reported its progress"
        time.sleep(0.1)
    yield task_id
    client.cancel_sync(redis_sync, task_id, key_prefix="vip")
    while task_id not in redis_sync.lrange(handlers.CANCELLED, 0, -1):
        assert time.monotonic() < deadline + 60, "the running task did not stop"
        time.sleep(0.1)


def pause(path: str, queue: str) -> None:
    done = subprocess.run([*console_script(), "pause", queue, "-f", path],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def cell(page: Any, queue: str, field: str) -> str:
    return str(page.locator(f"#queue-table [data-field='{field}:{queue}']").inner_text())


def test_flow_control_schedules_and_progress_show_as_redis_holds_them(
        page: Any, manifest: str, redis_url: str, redis_sync: redis.Redis,
        running_task: str) -> None:
    # running_task's poll was 10 minutes ago; now one for "report" only: "stalled" is behind
    through = redis_sync.hget("vip:schedules", "through:report")
    in_thread(lambda: operator_poll(redis_url, manifest, now=time.time(),
                                    seen={"report": int(through), "stalled": None}))
    pause(manifest, "normal")
    record = redis_sync.hgetall("vip:schedules")
    assert record["id:report"] and record["through:stalled"]  # fire.lua wrote them
    with console_process("-f", manifest, "--refresh", "1") as base:
        page.goto(base + NAME)
        # flow control: the spec's limits, the worker's held count, the CLI's pause
        assert cell(page, "vip", "rate") == "50 per 1s (burst 5)"
        assert cell(page, "vip", "max") == f"{redis_sync.hget('vip:flowstate', 'held:vip')} / 4"
        assert cell(page, "vip", "max") == "1 / 4"
        assert cell(page, "vip", "paused") == "no"
        paused_by = redis_sync.hget("vip:flow", "paused-cli:normal").split()[1]
        assert f"paused by `taskqueue pause` ({paused_by}, " in cell(page, "normal", "paused")
        # schedules: next slot from the spec, last slot and task as fire.lua recorded them
        report = page.locator("#schedules tr[data-schedule='report']")
        spec = manifests.load(manifest).spec
        upcoming = schedulespec.next_slots(spec.schedules[0], after=time.time(), count=1)[0]
        assert schedulespec.slot_text(upcoming) in report.locator("[data-field=next]").inner_text()
        last = schedulespec.slot_text(int(redis_sync.hget("vip:schedules", "slot:report")) / 1000)
        assert last in report.locator("[data-field=last]").inner_text()
        assert report.locator("[data-field=last-task]").inner_text() == record["id:report"]
        assert report.locator("[data-field=late]").inner_text() == "no"
        stalled = page.locator("#schedules tr[data-schedule='stalled']")
        assert "is not fired yet" in stalled.locator("[data-field=late]").inner_text()
        missed = redis_sync.hget("vip:schedules", "missed:stalled")
        assert stalled.locator("[data-field=missed]").inner_text() == (missed or "0")
        # the worker's last heartbeat (heartbeatSeconds 5, the default), alive
        beat = page.locator("#workers tr[data-worker='w1'] [data-field=beat]").inner_text()
        assert re.fullmatch(r"\d+\.\ds ago, expires in .+", beat), beat
        assert float(beat.split("s ago")[0]) < 15, beat  # 3 periods: it would be dead
        # the running task's progress, as its handler reported it
        held = page.locator(f"#workers [data-task='{running_task}']")
        expect(held.locator("progress")).to_have_attribute("value", "25")
        assert "25%" in held.inner_text() and "a quarter" in held.inner_text()
        page.screenshot(path=str(SCREENSHOTS / "console-flow-schedules-progress.png"),
                        full_page=True)
        # a resume from the CLI shows at the next refresh, without a reload
        done = subprocess.run([*console_script(), "resume", "normal", "-f", manifest],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        expect(page.locator("#queue-table [data-field='paused:normal']")).to_have_text(
            "no", timeout=30_000)
        pause(manifest, "normal")
        marker = page.locator("tr[data-tq='media/thumbs'] [data-field='paused:normal']")
        deadline = time.monotonic() + 30
        while True:  # the list page shows the shared snapshot: up to one refresh (1 s) old
            page.goto(base + "/")
            if marker.count() or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert marker.inner_text() == "paused"
        page.goto(base + NAME + "/queues")
        assert "in flight / max 1 / 4" in page.locator("p[data-flow='vip']").inner_text()
        assert "taskqueue pause" in page.locator("p[data-flow='normal']").inner_text()
        assert page.locator("#schedules tr[data-schedule='report']").count() == 1


def test_the_new_reads_work_under_exactly_the_consoles_acl_rule(
        redis_server: Any, redis_url: str, redis_sync: redis.Redis, manifest: str,
        running_task: str) -> None:
    in_thread(lambda: operator_poll(redis_url, manifest, now=time.time()))
    pause(manifest, "normal")
    redis_sync.execute_command("ACL", "SETUSER", "tq-console", "on", ">console-pw",
                               *acl.rule("console", ["vip*", "normal*"]).split())
    url = redis_server.url.replace("redis://", "redis://tq-console:console-pw@")
    try:
        with console_process("-f", manifest, "--redis-url", url, "--allow-actions") as base:
            b = Browser(base)
            status, page = b.get(NAME)
            assert status == 200
            for shown in ("50 per 1s (burst 5)", "1 / 4", "paused by `taskqueue pause`",
                          "a quarter", redis_sync.hget("vip:schedules", "id:report")):
                assert shown in page, shown
            assert "could not be read" not in page and "permission" not in page.lower()
            assert b.post(NAME + "/flow", {"action": "resume", "queue": "normal"})[0] == 200
            assert not redis_sync.hexists("vip:flow", "paused-cli:normal")
            assert b.post(NAME + "/flow", {"action": "pause", "queue": "vip"})[0] == 200
            assert redis_sync.hexists("vip:flow", "paused-cli:vip")
    finally:
        redis_sync.execute_command("ACL", "DELUSER", "tq-console")


def test_a_flow_or_schedules_key_of_another_type_is_named_and_the_rest_still_shows(
        redis_sync: redis.Redis, manifest: str) -> None:
    redis_sync.set("vip:flow", "not a hash")
    redis_sync.rpush("vip:schedules", "not a hash")
    redis_sync.lpush("vip", keys.wrap("x", task_id="t-1"))
    with console_process("-f", manifest) as base:
        status, page = Browser(base).get(NAME)
    assert status == 200
    assert ("Flow control could not be read: WRONGTYPE key vip:flow holds a string, not a hash"
            in page)
    assert "The schedules' record could not be read: key vip:schedules: WRONGTYPE" in page
    assert 'data-field="backlog:vip">1<' in page
    assert page.count("data-schedule=") == len(SCHEDULES)  # the spec's, without a record


def test_pause_and_resume_from_the_page_as_taskqueue_pause_does(
        page: Any, manifest: str, redis_sync: redis.Redis, make_worker: Any,
        handler_env: None) -> None:
    with console_process("-f", manifest, "--refresh", "1", "--allow-actions") as base:
        page.goto(base + NAME)
        page.locator("#queue-table tr[data-queue='normal'] button.pause").click()
        record = redis_sync.hget("vip:flow", "paused-cli:normal")
        assert record is not None and record.split()[1] == getpass.getuser()
        assert "paused by `taskqueue pause`" in cell(page, "normal", "paused")
        # the workers take nothing from it; the other queue goes on
        client.enqueue_sync(redis_sync, "normal", "held back", task_id="n-1")
        client.enqueue_sync(redis_sync, "vip", "goes", task_id="v-1")
        make_worker(queues=QUEUES)
        deadline = time.monotonic() + 60
        while "goes" not in redis_sync.lrange("test:done", 0, -1):
            assert time.monotonic() < deadline, "the vip task never ran"
            time.sleep(0.1)
        time.sleep(2)
        assert redis_sync.lrange("test:done", 0, -1) == ["goes"]
        assert redis_sync.llen("normal") == 1
        page.locator("#queue-table tr[data-queue='normal'] button.resume").click()
        assert not redis_sync.hexists("vip:flow", "paused-cli:normal")
        assert cell(page, "normal", "paused") == "no"
        while "held back" not in redis_sync.lrange("test:done", 0, -1):
            assert time.monotonic() < deadline, "the resumed queue's task never ran"
            time.sleep(0.1)
        # not a queue of this TaskQueue: one line naming the field
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "tq_csrf")
        bad = page.request.post(base + NAME + "/flow", headers={"Origin": base},
                                form={"csrf": csrf, "action": "pause", "queue": "nope"})
        assert bad.status == 400
        assert bad.text() == ("queue: 'nope' is not a queue of this TaskQueue; use one of "
                              "['vip', 'normal']")


def test_read_only_has_no_pause_and_refuses_a_forged_one(
        page: Any, manifest: str, redis_sync: redis.Redis) -> None:
    with console_process("-f", manifest) as base:
        page.goto(base + NAME)
        assert page.locator("#queue-table button").count() == 0
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "tq_csrf")
        forged = page.request.post(base + NAME + "/flow", headers={"Origin": base},
                                   form={"csrf": csrf, "action": "pause", "queue": "normal"})
        assert forged.status == 403
        # and an allowed console still wants the CSRF token
    with console_process("-f", manifest, "--allow-actions") as base:
        page.goto(base + NAME)
        no_token = page.request.post(base + NAME + "/flow", headers={"Origin": base},
                                     form={"action": "pause", "queue": "normal"})
        assert no_token.status == 403
    assert not redis_sync.exists("vip:flow")


def _reloaded(page: Any) -> bool:
    """False while the page is the one `_mark`ed (a reload or a navigation drops the mark)."""
    return not page.evaluate("window.__tqMarked === true")


def _mark(page: Any) -> None:
    page.evaluate("window.__tqMarked = true")


def _respec(path: str, queues: list[dict[str, Any]]) -> None:
    doc = json.loads(Path(path).read_text())
    doc["spec"]["queues"] = queues
    Path(path).write_text(json.dumps(doc))


def test_workers_progress_schedules_and_flow_refresh_without_a_reload(
        page: Any, manifest: str, redis_url: str, redis_sync: redis.Redis, make_worker: Any,
        handler_env: None) -> None:
    seen = in_thread(lambda: operator_poll(redis_url, manifest, now=time.time() - 600))
    make_worker(handler="tests.helpers.handlers:progress_steps", queues=QUEUES)
    client.enqueue_sync(redis_sync, "vip", "stepped", task_id="steps-1")
    redis_sync.rpush(handlers.STEPS, "0.1 warming up")
    deadline = time.monotonic() + 60
    while "warming up" not in (redis_sync.hget("vip:progress:w1", "steps-1") or ""):
        assert time.monotonic() < deadline, "the task never reported its progress"
        time.sleep(0.1)
    with console_process("-f", manifest, "--refresh", "1", "--allow-actions") as base:
        page.goto(base + NAME)
        held = page.locator("#workers [data-task='steps-1']")
        expect(held.locator("progress")).to_have_attribute("value", "10")
        report = page.locator("#schedules tr[data-schedule='report'] [data-field=last-task]")
        first_fired = report.inner_text()
        assert first_fired == redis_sync.hget("vip:schedules", "id:report")
        _mark(page)
        # the worker's heartbeat age follows (its beats and the refresh move it)
        beat = page.locator("#workers tr[data-worker='w1'] [data-field=beat]")
        expect(beat).not_to_have_text(beat.inner_text(), timeout=30_000)
        # the worker's handler reports further: the bar moves without a reload
        redis_sync.rpush(handlers.STEPS, "0.6 past half")
        expect(held.locator("progress")).to_have_attribute("value", "60", timeout=30_000)
        expect(held).to_contain_text("past half")
        # the operator's next poll fires the schedule's due slots: the table follows
        in_thread(lambda: operator_poll(redis_url, manifest, now=time.time(), seen=seen))
        fired = redis_sync.hget("vip:schedules", "id:report")
        assert fired and fired != first_fired
        expect(report).to_have_text(fired, timeout=30_000)
        expect(page.locator("#schedules tr[data-schedule='stalled'] [data-field=late]")
               ).to_have_text("no", timeout=30_000)  # its due slots were fired too
        # flow: a pause from the CLI turns the page's button into resume, a new limit shows
        pause(manifest, "normal")
        expect(page.locator("#queue-table tr[data-queue='normal'] button.resume")
               ).to_have_count(1, timeout=30_000)
        _respec(manifest, [{**QUEUES[0], "maxInFlight": 6}, QUEUES[1]])
        in_thread(lambda: operator_poll(redis_url, manifest, now=time.time(), seen=seen))
        expect(page.locator("#queue-table [data-field='max:vip']")).to_have_text(
            "1 / 6", timeout=30_000)
        # the task ends: it leaves the worker's row
        redis_sync.rpush(handlers.STEPS, "done")
        expect(held).to_have_count(0, timeout=30_000)
        assert not _reloaded(page)
        # the queues page: its flow lines and schedules follow too
        page.goto(base + NAME + "/queues")
        _mark(page)
        assert "taskqueue pause" in page.locator("p[data-flow='normal']").inner_text()
        done = subprocess.run([*console_script(), "resume", "normal", "-f", manifest],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        expect(page.locator("p[data-flow='normal']")).not_to_contain_text(
            "taskqueue pause", timeout=30_000)
        assert not _reloaded(page)


def _register(redis_sync: redis.Redis, schema: keys.KeySchema, count: int) -> list[str]:
    """`count` live workers in the registry, each holding one task of vip with a progress
    report (the formats workers write, docs/contracts.md)."""
    now = time.time()
    ids = [f"pod-{i:03d}" for i in range(count)]
    pipe = redis_sync.pipeline(transaction=False)
    for i, wid in enumerate(ids):
        pipe.zadd(schema.workers, {wid: (now + 3600) * 1000})
        task = keys.wrap(f"job {i}", task_id=f"job-{i}", enqueued_at=now - 5)
        pipe.rpush(schema.processing(wid), keys.Entry("vip", "", task).encode())
        pipe.hset(schema.progress(wid), f"job-{i}",
                  lifecycle.Progress(fraction=i / count, message=f"step {i}", at=now).encode())
    pipe.execute()
    return ids


def test_two_hundred_and_thirty_workers_come_a_page_at_a_time(
        page: Any, manifest: str, redis_sync: redis.Redis) -> None:
    schema = keys.KeySchema.from_spec(manifests.load(manifest).spec)
    ids = _register(redis_sync, schema, 230)
    size = reads.WORKERS_PAGE
    with console_process("-f", manifest, "--refresh", "1") as base:
        page.goto(base + NAME)
        rows = page.locator("#workers tr[data-worker]")
        assert rows.count() == size
        assert rows.first.get_attribute("data-worker") == ids[0]
        nav = page.locator("#workers-pages")
        assert "workers 1-50 of 230 (page 1 of 5)" in nav.inner_text()
        nav.locator("a[rel=next]").click()
        assert page.url == base + NAME + "/workers?page=1"
        assert rows.count() == size
        assert rows.first.get_attribute("data-worker") == ids[size]
        assert "workers 51-100 of 230" in nav.inner_text()
        page.screenshot(path=str(SCREENSHOTS / "console-workers.png"))
        # the last page: what is left, each worker with its held task and progress
        page.goto(base + NAME + "/workers?page=4")
        assert rows.count() == 230 - 4 * size
        assert nav.locator("a[rel=next]").count() == 0
        last = page.locator(f"#workers tr[data-worker='{ids[-1]}'] [data-task='job-229']")
        expect(last.locator("progress")).to_have_attribute("value", str(round(100 * 229 / 230)))
        # it refreshes its own page of workers
        _mark(page)
        redis_sync.hset(schema.progress(ids[-1]), "job-229", lifecycle.Progress(
            fraction=0.05, message="restarted", at=time.time()).encode())
        expect(last).to_contain_text("restarted", timeout=30_000)
        assert rows.count() == 230 - 4 * size and not _reloaded(page)
        page.goto(base + NAME + "/workers?page=99")  # past the end: the last page
        assert rows.count() == 230 - 4 * size


def viewers_cost(manifest: str, redis_sync: redis.Redis, *, query: str, counted: tuple[str, ...],
                 viewers: int) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """`viewers` viewers asking a console of its own for `query` at once: the calls of each
    command in `counted` they cost Redis (INFO commandstats before and after), and their
    replies. Refresh 60 s: no second refresh within the call."""

    def calls() -> dict[str, int]:
        stats = redis_sync.info("commandstats")
        return {c: int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in counted}

    with console_process("-f", manifest, "--refresh", "60") as base:
        b = Browser(base)
        before = calls()
        with ThreadPoolExecutor(viewers) as pool:
            replies = list(pool.map(lambda _: b.get(query), range(viewers)))
        after = calls()
    return {c: after[c] - before[c] for c in after}, replies


def test_viewers_share_the_observe_call_and_the_workers_read(
        manifest: str, redis_sync: redis.Redis) -> None:
    """Twenty viewers asking at once for everything a page refreshes (its parts and a page of
    workers) cost Redis what one viewer costs: one refresh (its observe call) and one read of
    the held tasks (refresh 60 s: no second within the test)."""
    schema = keys.KeySchema.from_spec(manifests.load(manifest).spec)
    ids = _register(redis_sync, schema, 80)
    query = NAME + "/data.json?parts=queues,schedules,workers&workers=1"
    counted = ("evalsha", "eval", "xrange", "hgetall", "lrange")
    # a first viewer: Redis then caches the scripts, no NOSCRIPT retry is counted below
    viewers_cost(manifest, redis_sync, query=query, counted=counted, viewers=1)
    one, _ = viewers_cost(manifest, redis_sync, query=query, counted=counted, viewers=1)
    twenty, replies = viewers_cost(manifest, redis_sync, query=query, counted=counted,
                                   viewers=20)
    assert all(status == 200 for status, _ in replies)
    shown = {tuple(re.findall(r'data-worker="([^"]+)"', json.loads(body)["parts"]["workers"]))
             for _, body in replies}
    assert shown == {tuple(sorted(ids)[reads.WORKERS_PAGE:])}  # the second page, for each
    assert twenty == one
    assert one["evalsha"] + one["eval"] >= 1 and one["xrange"] == 1  # one refresh
    page = 80 - reads.WORKERS_PAGE  # one page's pipeline: an LRANGE and an HGETALL a worker
    assert (one["lrange"], one["hgetall"]) == (page, page + 2)  # + the refresh's flow hashes


def test_the_list_page_refreshes_without_a_reload(page: Any, manifest: str, redis_url: str,
                                                 redis_sync: redis.Redis) -> None:
    """The all-TaskQueues page follows Redis: a task enqueued raises its queue's backlog, a
    `taskqueue pause` from the CLI shows paused, the in-flight count follows, no reload."""
    in_thread(lambda: operator_poll(redis_url, manifest, now=time.time() - 600))
    with console_process("-f", manifest, "--refresh", "1") as base:
        page.goto(base + "/")
        table = page.locator("#taskqueues tr[data-tq='media/thumbs']")
        expect(table.locator("[data-field='backlog:vip']")).to_have_text("0")
        assert table.locator("[data-field='paused:normal']").count() == 0
        _mark(page)
        client.enqueue_sync(redis_sync, "vip", "one", task_id="list-1")
        client.enqueue_sync(redis_sync, "vip", "two", task_id="list-2")
        expect(table.locator("[data-field='backlog:vip']")).to_have_text("2", timeout=30_000)
        pause(manifest, "normal")
        expect(table.locator("[data-field='paused:normal']")).to_have_text(
            "paused", timeout=30_000)
        assert "taskqueue pause" in str(
            table.locator("[data-field='paused:normal']").get_attribute("title"))
        # a link of the refreshed table still leads to the TaskQueue's page
        assert not _reloaded(page)
        table.locator("a", has_text="media/thumbs").click()
        assert page.url == base + NAME


def test_list_viewers_share_the_observe_call(manifest: str, redis_sync: redis.Redis) -> None:
    """Twenty viewers of the list page's refresh at once cost Redis what one viewer costs: one
    refresh of each TaskQueue (refresh 60 s: no second within the test)."""
    query, counted = "/data.json", ("evalsha", "eval", "xrange", "hgetall", "llen")
    # a first viewer: Redis then caches the scripts, no NOSCRIPT retry is counted below
    viewers_cost(manifest, redis_sync, query=query, counted=counted, viewers=1)
    one, _ = viewers_cost(manifest, redis_sync, query=query, counted=counted, viewers=1)
    twenty, replies = viewers_cost(manifest, redis_sync, query=query, counted=counted,
                                   viewers=20)
    assert all(status == 200 for status, _ in replies)
    assert all('data-tq="media/thumbs"' in json.loads(body)["parts"]["taskqueues"]
               for _, body in replies)
    assert twenty == one
    assert one["evalsha"] + one["eval"] >= 1 and one["xrange"] == 1  # one refresh


def test_the_queues_pages_task_lists_refresh_and_viewers_share_their_read(
        page: Any, manifest: str, redis_sync: redis.Redis) -> None:
    """The queues page's next tasks and delayed entries follow Redis without a reload; twenty
    viewers refreshing it at once cost Redis what one costs: one refresh, one read of the lists
    (refresh 60 s: no second within the test)."""
    with console_process("-f", manifest, "--refresh", "1") as base:
        page.goto(base + NAME + "/queues")
        vip = page.locator("table[data-queue='vip']")
        expect(vip).to_contain_text("empty")
        _mark(page)
        client.enqueue_sync(redis_sync, "vip", "<b>fresh</b>", task_id="fresh-1")
        expect(vip.locator("tr", has_text="fresh-1")).to_contain_text(
            "<b>fresh</b>", timeout=30_000)  # as text, by the page's own escaping partial
        assert vip.locator("b").count() == 0
        client.enqueue_sync(redis_sync, "normal", "later", task_id="later-1", delay=3600,
                            key_prefix="vip")  # the TaskQueue's delayed set: vip:delayed
        expect(page.locator("#delayed tr", has_text="later-1")).to_have_count(
            1, timeout=30_000)
        assert not _reloaded(page)

    query, counted = NAME + "/data.json?parts=lists", ("lrange", "zrange")
    one, _ = viewers_cost(manifest, redis_sync, query=query, counted=counted, viewers=1)
    twenty, replies = viewers_cost(manifest, redis_sync, query=query, counted=counted,
                                   viewers=20)
    assert all("fresh-1" in json.loads(body)["parts"]["lists"] for _, body in replies)
    assert twenty == one
    # the lists' read (an LRANGE per list queue, a ZRANGE of the delayed set) is in it, once
    assert one["lrange"] >= 2 and one["zrange"] >= 1, one


def test_secure_cookies_in_the_browser_and_its_forms_still_work(
        page: Any, manifest: str, redis_sync: redis.Redis) -> None:
    """--secure-cookies: Chromium keeps the Secure CSRF cookie of http://127.0.0.1 (a
    trustworthy origin, as a port-forward is), and the page's pause form still works; without
    the flag the cookie is not Secure (the cluster tier tests the session cookie and the
    https:// origin of a TLS-terminating Ingress)."""
    for flag, secure in ((["--secure-cookies"], True), ([], False)):
        page.context.clear_cookies()
        with console_process("-f", manifest, "--allow-actions", *flag) as base:
            page.goto(base + NAME)
            [csrf] = [c for c in page.context.cookies() if c["name"] == "tq_csrf"]
            assert (csrf["secure"], csrf["httpOnly"], csrf["sameSite"]) == (secure, True,
                                                                            "Strict")
            page.locator("#queue-table tr[data-queue='normal'] button.pause").click()
            assert redis_sync.hexists("vip:flow", "paused-cli:normal")
            page.locator("#queue-table tr[data-queue='normal'] button.resume").click()
            assert not redis_sync.hexists("vip:flow", "paused-cli:normal")
