"""`taskqueue console` in a real Chromium against a real redis-server and real workers.

Specs: the numbers on the pages are Redis's; the charts and the decision log read the operator's
streams; a requeue from the page puts the task back and a worker runs it; payloads and errors
that are HTML show as text and run nothing (no dialog, no script); read-only refuses actions;
every action needs the CSRF token and this console's origin; dead letters page and search.
Screenshots go to docs/images/console-*.png (docs/console.md shows them).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from playwright.sync_api import expect

from taskqueue.wire import history, keys
from tests.helpers.browser import SCREENSHOTS, console_process

NAME = "/tq/media/thumbs"
XSS_PAYLOAD = '<script>window.__pwned = 1; alert("payload")</script>'
XSS_ERROR = '<img src=x onerror="window.__pwned = 2; alert(\'error\')">'


@pytest.fixture
def manifest(tmp_path: Path, redis_url: str) -> str:
    doc = {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
           "metadata": {"name": "thumbs", "namespace": "media"},
           "spec": {"redis": {"url": redis_url}, "queues": [{"key": "vip"}, {"key": "normal"}],
                    "scaling": {"targetWaitSeconds": {"vip": 5, "normal": 60}}}}
    path = tmp_path / "taskqueue.yaml"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture
def console(manifest: str) -> Iterator[Callable[..., Any]]:
    """console(*flags) -> base URL of a `taskqueue console -f manifest FLAGS` process."""
    stack: list[Any] = []

    def start(*flags: str) -> str:
        cm = console_process("-f", manifest, "--refresh", "1", *flags)
        stack.append(cm)
        return cm.__enter__()

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def dead_record(task_id: str, *, payload: str = '{"n": 1}', queue: str = "normal",
                error: str = "boom", failed_at: float | None = None) -> str:
    return json.dumps({"queue": queue, "payload": payload, "attempts": 3, "error": error,
                       "failed_at": failed_at or time.time(), "id": task_id})


def operator_streams(r: redis.Redis, now_ms: int) -> None:
    """What the operator's poller writes (through `wire.history`): a history point a minute for
    the last half hour, and two decisions."""
    for i in range(30):
        t = now_ms - (30 - i) * 60_000
        point = history.HistoryPoint(
            t=t, dt=60_000, desired=1 + i // 10, replicas=1 + i // 10, ready=1 + i // 10,
            inflight=i % 4, workers=1, completed=60 + i, failed=0,
            queues={"vip": history.QueuePoint(backlog=i, arrived=30),
                    "normal": history.QueuePoint(backlog=2 * i, arrived=40)})
        r.xadd("vip:history", point.fields(), id=f"{t}-0")
    for i, (before, after) in enumerate([(1, 2), (2, 3)]):
        t = now_ms - (20 - 10 * i) * 60_000
        entry = history.DecisionEntry(
            t=t, previous=before, replicas=after, recommendation=after, rule="target-wait",
            reason=f"p95 wait over target: {before} -> {after} replicas", backlog=10, inflight=2)
        r.xadd("vip:decisions", entry.fields(), id=f"{t}-0")


def field(page: Any, name: str) -> str:
    return str(page.locator(f"#summary [data-field='{name}']").inner_text())


def test_the_pages_show_what_redis_holds(page: Any, console: Any, redis_sync: redis.Redis
                                         ) -> None:
    for i in range(7):
        redis_sync.lpush("vip", keys.wrap(f'{{"thumb": {i}}}', task_id=f"vip-{i}"))
    for i in range(12):
        redis_sync.lpush("normal", keys.wrap(f'{{"thumb": {i}}}', task_id=f"normal-{i}"))
    redis_sync.lpush("normal", "a raw payload, no envelope")
    redis_sync.zadd("vip:delayed", {keys.Entry("vip", "0", keys.wrap("later", task_id="due-1"))
                                    .encode(): (time.time() + 600) * 1000})
    for i in range(3):
        redis_sync.lpush("vip:dead", dead_record(f"dead-{i}"))
    operator_streams(redis_sync, int(time.time() * 1000))
    base = console()

    page.goto(base + "/")
    row = page.locator("tr[data-tq='media/thumbs']")
    assert row.locator("[data-field='backlog:vip']").inner_text() == "7"
    assert row.locator("[data-field='backlog:normal']").inner_text() == "13"
    assert row.locator("[data-field='dead']").inner_text() == "3"
    page.screenshot(path=str(SCREENSHOTS / "console-list.png"), full_page=True)

    page.goto(base + NAME)
    assert field(page, "backlog") == str(redis_sync.llen("vip") + redis_sync.llen("normal"))
    assert field(page, "delayed") == str(redis_sync.zcard("vip:delayed")) == "1"
    assert field(page, "dead") == str(redis_sync.llen("vip:dead"))
    decisions = page.locator("#decisions tbody tr")
    assert decisions.count() == 2
    assert "2 -> 3 replicas" in decisions.first.inner_text()  # newest first
    # the charts: drawn from the 30 history points by the page's script (uPlot)
    expect(page.locator("#charts canvas")).to_have_count(3, timeout=30_000)
    assert "30 history point(s)" in page.locator("#charts-note").inner_text()
    # the live refresh: a task more in Redis shows without a reload
    redis_sync.lpush("vip", keys.wrap("one more", task_id="vip-late"))
    expect(page.locator("#summary [data-field='backlog']")).to_have_text("21", timeout=30_000)
    page.screenshot(path=str(SCREENSHOTS / "console-taskqueue.png"), full_page=True)

    page.goto(base + NAME + "/queues")
    vip = page.locator("table[data-queue='vip'] tbody tr")
    assert vip.count() == 8
    assert vip.first.locator("td").first.inner_text() == "vip-0"  # served next: the oldest
    assert "a raw payload, no envelope" in page.locator("table[data-queue='normal']").inner_text()
    assert "due-1" in page.locator("#delayed").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "console-queues.png"), full_page=True)


def test_html_in_payloads_and_errors_is_text_and_runs_nothing(
        page: Any, console: Any, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("vip:dead", dead_record("xss-1", payload=XSS_PAYLOAD, error=XSS_ERROR))
    redis_sync.lpush("vip:dead", b'{"queue": "normal", "payload": "bytes \\u00e9", "id": "x"}')
    redis_sync.lpush("vip:dead", b"\xff\xfe not json <b>bold</b>")
    redis_sync.lpush("vip", keys.wrap(XSS_PAYLOAD, task_id="<i>id</i>"))
    base = console("--allow-actions")
    for path in ("/dead", "/queues", "/dead?q=" + "%3Cscript%3E"):
        page.goto(base + NAME + path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None
        assert page.dialogs == []
        assert page.locator("img").count() == 0
    page.goto(base + NAME + "/dead")
    text = page.locator("#dead").inner_text()
    assert XSS_PAYLOAD in text and XSS_ERROR in text
    assert "\\xff\\xfe not json <b>bold</b>" in text  # bytes that are not UTF-8, shown safely
    page.screenshot(path=str(SCREENSHOTS / "console-dead-letters.png"), full_page=True)


def test_a_requeue_from_the_page_puts_the_task_back_and_a_worker_runs_it(
        page: Any, console: Any, redis_sync: redis.Redis, make_worker: Any,
        handler_env: None) -> None:
    payload = "caf\u00e9 \\ byte-exact"
    redis_sync.lpush("vip:dead", dead_record("again-1", payload=payload, queue="normal"))
    redis_sync.lpush("vip:dead", dead_record("elsewhere", queue="not-ours"))
    base = console("--allow-actions")
    page.goto(base + NAME + "/dead")
    page.locator("tr[data-digest]", has_text="again-1").locator("button.requeue").click()
    assert "Requeue 1 dead letter(s)" in page.locator("h1").inner_text()
    page.locator("#confirm").click()
    assert page.locator("#result").inner_text() == "requeued 1 record(s)"
    assert redis_sync.llen("vip:dead") == 1
    task = keys.unwrap(str(redis_sync.lindex("normal", 0)))
    assert (task.payload, task.id, task.attempts) == (payload, "again-1", 0)
    # a record whose queue is not one of this TaskQueue's: reported and kept
    page.goto(base + NAME + "/dead")
    page.locator("tr[data-digest]", has_text="elsewhere").locator("button.requeue").click()
    page.locator("#confirm").click()
    assert page.locator("#result").inner_text() == "requeued 0 record(s)"
    assert "is not a queue of this TaskQueue" in page.locator("#kept").inner_text()
    assert redis_sync.llen("vip:dead") == 1
    make_worker(queues=[{"key": "vip"}, {"key": "normal"}])
    deadline = time.monotonic() + 60
    while redis_sync.llen("test:done") == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert redis_sync.lrange("test:done", 0, -1) == [payload]


def test_search_pages_and_acts_on_exactly_the_filtered_set(
        page: Any, console: Any, redis_sync: redis.Redis) -> None:
    for i in range(60):
        redis_sync.lpush("vip:dead", dead_record(f"task-{i}", error="timeout" if i % 3 == 0
                                                 else "ValueError", failed_at=1000.0 + i))
    base = console("--allow-actions")
    page.goto(base + NAME + "/dead")
    assert "60 record(s), newest first; page 1 of 3" in page.locator("#page-note").inner_text()
    assert page.locator("#dead tbody tr").first.locator("td").first.inner_text() == "task-59"
    page.locator("a[rel=next]").click()
    assert page.locator("#dead tbody tr").first.locator("td").first.inner_text() == "task-34"
    page.goto(base + NAME + "/dead?q=task-7")
    assert page.locator("#dead tbody tr").count() == 1  # the id, exactly
    page.goto(base + NAME + "/dead?q=timeout")
    assert page.locator("#dead tbody tr").count() == 20
    page.locator("#delete-all").click()
    assert "Delete 20 dead letter(s)" in page.locator("h1").inner_text()
    redis_sync.lpush("vip:dead", dead_record("arrived-meanwhile", error="timeout"))
    page.locator("#confirm").click()
    assert page.locator("#result").inner_text() == "deleted 20 record(s)"
    left = [json.loads(r) for r in redis_sync.lrange("vip:dead", 0, -1)]
    assert len(left) == 41
    assert [r["id"] for r in left if r["error"] == "timeout"] == ["arrived-meanwhile"]


def test_read_only_shows_no_action_and_refuses_a_forged_one(
        page: Any, console: Any, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("vip:dead", dead_record("stay"))
    base = console()
    page.goto(base + NAME + "/dead")
    assert page.locator("button").filter(has_text="requeue").count() == 0
    assert "--allow-actions" in page.locator("#read-only").inner_text()
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "tq_csrf")
    reply = page.request.post(base + NAME + "/dead/act", headers={"Origin": base},
                              form={"csrf": csrf, "action": "delete", "digests": "x"})
    assert reply.status == 403
    assert redis_sync.llen("vip:dead") == 1


@pytest.mark.parametrize(("origin", "with_token"), [
    ("same", False),                       # no token in the form
    ("http://evil.example", True),         # the token, from another site
    (None, True),                          # no Origin nor Referer
], ids=["no-token", "foreign-origin", "no-origin"])
def test_an_action_without_the_token_or_from_elsewhere_is_refused(
        page: Any, console: Any, redis_sync: redis.Redis, origin: str | None,
        with_token: bool) -> None:
    redis_sync.lpush("vip:dead", dead_record("stay"))
    base = console("--allow-actions")
    page.goto(base + NAME + "/dead")
    digest = page.locator("tr[data-digest]").first.get_attribute("data-digest")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "tq_csrf")
    headers = {} if origin is None else {"Origin": base if origin == "same" else origin}
    form = {"action": "delete", "digests": digest, **({"csrf": csrf} if with_token else {})}
    reply = page.request.post(base + NAME + "/dead/act", headers=headers, form=form)
    assert reply.status == 403
    assert redis_sync.llen("vip:dead") == 1
    # the same request with the token and this console's origin goes through
    reply = page.request.post(base + NAME + "/dead/act", headers={"Origin": base},
                              form={"action": "delete", "digests": digest, "csrf": csrf})
    assert reply.status == 200
    assert redis_sync.llen("vip:dead") == 0


def test_no_secret_in_any_page(page: Any, manifest: str, redis_server: Any,
                               redis_sync: redis.Redis, tmp_path: Path) -> None:
    redis_sync.config_set("requirepass", "s3cret-pw")
    try:
        url = redis_server.url.replace("redis://", "redis://:s3cret-pw@")
        with console_process("-f", manifest, "--redis-url", url) as base:
            for path in ("/", NAME, NAME + "/queues", NAME + "/dead", NAME + "/data.json"):
                page.goto(base + path)
                assert "s3cret-pw" not in page.content()
                assert "s3cret-pw" not in page.url
    finally:
        redis.Redis.from_url(redis_server.url, password="s3cret-pw").config_set(
            "requirepass", "")


def test_every_page_and_action_works_with_exactly_the_consoles_acl_rule(
        redis_server: Any, redis_sync: redis.Redis, manifest: str) -> None:
    from taskqueue.redisio import acl
    from tests.helpers.browser import Browser

    redis_sync.lpush("normal", keys.wrap("x", task_id="n1"))
    redis_sync.zadd("vip:delayed", {keys.Entry("vip", "0", "y").encode(): 1})
    redis_sync.lpush("vip:dead", dead_record("acl-1"))
    operator_streams(redis_sync, int(time.time() * 1000))
    redis_sync.execute_command("ACL", "SETUSER", "tq-console", "on", ">console-pw",
                               *acl.rule("console", ["vip*", "normal*"]).split())
    url = redis_server.url.replace("redis://", "redis://tq-console:console-pw@")
    try:
        with console_process("-f", manifest, "--redis-url", url, "--allow-actions") as base:
            b = Browser(base)
            for path in ("/", NAME, NAME + "/queues", NAME + "/dead", NAME + "/dead?q=acl",
                         NAME + "/data.json"):
                status, page = b.get(path)
                assert status == 200 and "permission" not in page.lower(), (path, page[:300])
            digest = re.search(r'data-digest="([0-9a-f]{40})"', b.get(NAME + "/dead")[1])
            assert digest is not None
            status, page = b.post(NAME + "/dead/act", {"action": "requeue",
                                                       "digests": digest.group(1)})
            assert status == 200 and "requeued 1 record(s)" in page, page
    finally:
        redis_sync.execute_command("ACL", "DELUSER", "tq-console")
