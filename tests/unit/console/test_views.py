"""The console's pure parts: what a page shows from a snapshot, the CSRF and origin rules, the
dead-letter search, and one refresh shared by concurrent viewers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from taskqueue.cli.records import DeadLetter
from taskqueue.console import live, reads, security, views
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.wire import flow, history, keys, lifecycle

SCHEMA = keys.KeySchema(prefix="vip", queues=(keys.QueueRef("vip"), keys.QueueRef("bulk", "zset")),
                        dead_letter="vip:dead")
TQ = views.Hosted(namespace="media", name="thumbs", schema=SCHEMA, target_wait={"vip": 5.0})


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "-"), (float("inf"), "-"), (-3, "0.0s"), (4.25, "4.2s"), (185, "3m05s"),
    (7800, "2h10m"),
])
def test_durations(seconds: float | None, shown: str) -> None:
    assert views.duration(seconds) == shown


def point(*, dt: int = 10_000, completed: int | None = 50,
          arrived: tuple[int | None, ...] = (30, 10)) -> history.HistoryPoint:
    return history.HistoryPoint(
        t=1_000_000, dt=dt, desired=3, replicas=2, ready=1, inflight=4, workers=2,
        completed=completed, queues={"vip": history.QueuePoint(backlog=5, arrived=arrived[0]),
                                     "bulk": history.QueuePoint(backlog=7, arrived=arrived[1])})


@pytest.mark.parametrize(("p", "arrivals", "completions"), [
    (None, None, None),
    (point(), 4.0, 5.0),
    (point(completed=None, arrived=(None, None)), None, None),
    (point(arrived=(None, 20)), 2.0, 5.0),
    (point(dt=0), None, None),
], ids=["no-history", "both", "unknown", "one-queue-known", "zero-interval"])
def test_rates_over_the_last_interval(p: history.HistoryPoint | None, arrivals: float | None,
                                      completions: float | None) -> None:
    assert views.rates(p) == {"arrivals": arrivals, "completions": completions}


def test_replicas_come_from_the_status_when_the_api_server_is_read_else_the_history() -> None:
    assert views.replicas(TQ, point())["source"] == "history"
    assert views.replicas(TQ, None) == {"desired": None, "actual": None, "ready": None,
                                        "source": "none"}
    in_cluster = views.Hosted(namespace="m", name="t", schema=SCHEMA, target_wait={},
                              status={"desiredReplicas": 4, "replicas": 3, "readyReplicas": 2})
    assert views.replicas(in_cluster, point()) == {"desired": 4, "actual": 3, "ready": 2,
                                                   "source": "status"}


def test_the_summary_of_a_snapshot_and_of_an_unreachable_redis() -> None:
    obs = QueueObservation(at=100.0, backlog={"vip": 3, "bulk": 9}, delayed=2, dead_letter=1,
                           workers=(WorkerObservation("w1", 200_000, 2),),
                           oldest_enqueued_at={"vip": 90.0},
                           waited={"vip": (10, 10, 10, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0)})
    got = views.summary(TQ, live.Snapshot(at=100.0, observation=obs,
                                          points=[("1-0", point())]))
    assert (got["backlog"], got["inflight"], got["workers"], got["delayed"], got["dead"]) == (
        12, 2, 1, 2, 1)
    assert got["queues"][0] == {"key": "vip", "type": "list", "backlog": 3, "oldest": "10.0s",
                                "p95": got["queues"][0]["p95"], "target": "5.0s", "late": False,
                                "rate": "-", "max": "-", "paused": "", "paused_cli": False}
    assert got["arrivals"] == "4.00/s"
    down = views.summary(TQ, live.Snapshot(at=1.0, error="Connection refused"))
    assert (down["reachable"], down["backlog"], down["error"]) == (False, None,
                                                                   "Connection refused")


@pytest.mark.parametrize(("f", "cells"), [
    (None, {"rate": "-", "max": "-", "paused": "", "paused_cli": False}),
    (flow.QueueFlow("vip"), {"rate": "-", "max": "-", "paused": "", "paused_cli": False}),
    (flow.QueueFlow("vip", rate=(50, 1.0, 10), max_in_flight=8, held=3),
     {"rate": "50 per 1s (burst 10)", "max": "3 / 8", "paused": "", "paused_cli": False}),
    (flow.QueueFlow("vip", max_in_flight=8),
     {"rate": "-", "max": "? / 8", "paused": "", "paused_cli": False}),
    (flow.QueueFlow("vip", paused=True, paused_cli="940 alice"),
     {"rate": "-", "max": "-", "paused": "paused by spec.queues[].paused; paused by "
      "`taskqueue pause` (alice, 1.0s ago)", "paused_cli": True}),
    (flow.QueueFlow("vip", paused_cli="garbage"),
     {"rate": "-", "max": "-", "paused": "paused by `taskqueue pause` (?, - ago)",
      "paused_cli": True}),
], ids=["unread", "none", "limits", "held-unknown", "both-pauses", "unreadable-record"])
def test_a_queues_flow_control_as_shown(f: flow.QueueFlow | None, cells: dict[str, str]) -> None:
    assert views.flow_cells(f, now=941.0) == cells


def test_a_held_task_shows_its_progress_report_and_a_task_without_one_shows_none() -> None:
    obs = QueueObservation(at=100.0, backlog={}, workers=(WorkerObservation("w1", 200_000, 2),))
    running = keys.Entry("vip", "", keys.wrap("p", task_id="t-1", enqueued_at=90.0))
    quiet = keys.Entry("vip", "", keys.wrap("q", task_id="t-2", enqueued_at=95.0))
    held = reads.Held(entries={"w1": [running, quiet]},
                      progress={"w1": {"t-1": lifecycle.Progress(0.426, "<b>resizing</b>", 98.0)}})
    tasks = views.worker_rows(obs, held, now=100.0)[0]["tasks"]
    assert [(t["id"], t["progress"], t["percent"], t["message"], t["reported"])
            for t in tasks] == [("t-1", True, 43, "<b>resizing</b>", "2.0s"),
                                ("t-2", False, None, "", "-")]
    no_fraction = reads.Held(entries={"w1": [running]},
                             progress={"w1": {"t-1": lifecycle.Progress(None, "step 2", 99.0)}})
    assert views.worker_rows(obs, no_fraction, now=100.0)[0]["tasks"][0]["percent"] is None


def test_schedules_show_next_and_last_slot_and_a_due_slot_not_fired_as_late() -> None:
    from taskqueue.api.schedulespec import ScheduleSpec

    every_minute = ScheduleSpec(name="report", cron="* * * * *", queue="vip", payload="x")
    tq = views.Hosted(namespace="m", name="t", schema=SCHEMA, target_wait={},
                      schedules=(every_minute,
                                 ScheduleSpec(name="off", cron="@daily", queue="vip",
                                              payload="y", suspend=True)))
    now = 1_800_000_030.0  # 30 s past a minute
    fresh = views.schedule_rows(tq, {"report": {"through": str(int(now + 60) * 1000),
                                                "slot": "1800000000000", "id": "report:x",
                                                "missed": "2", "skipped": "1"}}, now)
    assert [(r["name"], r["next"], r["last"], r["last_task"], r["late"], r["missed"],
             r["skipped"]) for r in fresh] == [
        ("report", "2027-01-15T08:01:00Z", "2027-01-15T08:00:00Z", "report:x", None, 2, 1),
        ("off", "-", "-", "-", None, 0, 0)]
    # the operator stopped: accounted through 2 minutes ago, the slot after it is overdue
    behind = views.schedule_rows(tq, {"report": {"through": str(int(now - 120) * 1000)}}, now)
    assert behind[0]["late"] == "1m30s"
    assert views.schedule_rows(tq, {}, now)[0]["late"] is None  # never fired: nothing known


def test_chart_series_keep_unknown_numbers_unknown() -> None:
    got = views.series(TQ, [("1-0", point()), ("2-0", point(completed=None,
                                                             arrived=(None, None)))])
    assert got["t"] == [1000.0, 1000.0]
    assert got["backlog"] == {"vip": [5, 5], "bulk": [7, 7]}
    assert got["completions"] == [5.0, None]
    assert got["arrivals"] == [4.0, None]


def test_a_dead_letter_that_is_not_utf8_or_not_json_is_shown_as_text() -> None:
    raw = b"\xff{not json".decode("utf-8", "surrogateescape")
    row = views.dead_row(DeadLetter.parse(raw), now=0.0)
    assert row["payload"] == "\\xff{not json"
    assert row["problems"] == ["not a JSON object"]
    assert len(row["digest"]) == 40


RECORD = DeadLetter.parse(json.dumps({"queue": "vip", "payload": "resize photo-9",
                                      "error": "TimeoutError: 30s", "id": "t-17"}))


@pytest.mark.parametrize(("text", "found"), [
    ("", True), ("t-17", True), ("t-1", False), ("photo-9", True), ("TimeoutError", True),
    ("vip", False),
], ids=["empty", "id", "id-prefix-is-not-the-id", "payload", "error", "queue-not-searched"])
def test_search_matches_the_id_exactly_and_payload_or_error_by_substring(text: str,
                                                                         found: bool) -> None:
    assert reads.matches(RECORD, text) is found


@pytest.mark.parametrize(("origin", "referer", "ok"), [
    ("http://127.0.0.1:8470", None, True),
    ("http://127.0.0.1:8470", "http://evil.example/", True),
    ("http://evil.example", "http://127.0.0.1:8470/x", False),
    ("https://127.0.0.1:8470", None, False),
    ("null", "http://127.0.0.1:8470/tq/a/b/dead", True),
    (None, "http://127.0.0.1:8470/tq/a/b/dead", True),
    (None, None, False),
    ("http://127.0.0.1:8471", None, False),
], ids=["origin", "origin-wins", "foreign", "other-scheme", "null-origin-referer", "referer",
        "neither", "other-port"])
def test_an_action_must_come_from_this_console(origin: str | None, referer: str | None,
                                               ok: bool) -> None:
    assert security.same_origin(origin=origin, referer=referer, host="127.0.0.1:8470",
                                scheme="http") is ok


@pytest.mark.parametrize(("cookie", "field", "ok"), [
    ("a" * 43, "a" * 43, True), ("a" * 43, "b" * 43, False), (None, "x", False),
    ("x", None, False), ("", "", False),
])
def test_the_form_must_repeat_the_cookie_token(cookie: str | None, field: str | None,
                                               ok: bool) -> None:
    assert security.token_ok(cookie=cookie, field=field) is ok


async def test_concurrent_viewers_share_one_refresh_and_the_ttl_holds_it() -> None:
    clock = [100.0]
    shared = live.Shared(ttl=5.0, clock=lambda: clock[0])
    calls = []

    async def load(previous: live.Snapshot | None) -> live.Snapshot:
        calls.append(previous)
        await asyncio.sleep(0.01)
        return live.Snapshot(at=clock[0])

    got = await asyncio.gather(*(shared.get("media/thumbs", load) for _ in range(20)))
    assert len(calls) == 1 and all(g is got[0] for g in got)
    clock[0] += 4.9
    await shared.get("media/thumbs", load)
    assert len(calls) == 1
    clock[0] += 0.2
    await shared.get("media/thumbs", load)
    assert len(calls) == 2 and calls[1] is got[0]  # the next refresh starts from the last
    await shared.get("other/tq", load)
    assert len(calls) == 3


def test_the_next_slot_is_remembered_until_it_passes() -> None:
    from taskqueue.api.schedulespec import ScheduleSpec

    hourly = ScheduleSpec(name="h", cron="0 * * * *", queue="vip", payload="x")
    slots = views.NextSlots()
    t = 1_800_000_030.0  # 08:00:30
    assert slots.after(hourly, t, key="k") == 1_800_003_600.0
    assert slots.after(hourly, t + 3000, key="k") == 1_800_003_600.0  # still before it
    assert slots.after(hourly, 1_800_003_600.0, key="k") == 1_800_007_200.0  # passed: anew
    assert slots.after(hourly, t - 7200, key="k") == 1_799_996_400.0  # earlier: anew
    every_minute = ScheduleSpec(name="h", cron="* * * * *", queue="vip", payload="x")
    assert slots.after(every_minute, t, key="k") == 1_800_000_060.0  # another cron: its own


def test_a_workers_heartbeat_age_is_its_deadline_less_the_periods_it_is_given() -> None:
    obs = QueueObservation(at=100.0, backlog={}, workers=(WorkerObservation("w1", 113_000, 0),))
    assert views.worker_rows(obs, reads.Held(), now=100.0)[0]["beat"] == "-"  # no spec
    row = views.worker_rows(obs, reads.Held(), now=100.0, heartbeat_seconds=5.0)[0]
    assert (row["beat"], row["deadline"]) == ("2.0s", "13.0s")  # beat at 98 + 3 x 5 s = 113


@pytest.mark.parametrize(("count", "page", "expected"), [
    (0, 0, ((), 0, 1, 0, 0, 0)),
    (2, 0, (("w0", "w1"), 0, 1, 1, 2, 0)),
    (5, 0, (("w0", "w1"), 0, 3, 1, 2, 3)),
    (5, 1, (("w2", "w3"), 1, 3, 3, 4, 1)),
    (5, 2, (("w4",), 2, 3, 5, 5, 0)),
    (5, 9, (("w4",), 2, 3, 5, 5, 0)),  # past the end: the last page
])
def test_workers_come_a_page_at_a_time_ordered_by_id(
        count: int, page: int, expected: tuple[Any, ...]) -> None:
    workers = tuple(WorkerObservation(f"w{i}", 113_000, 0) for i in reversed(range(count)))
    got = views.worker_page(QueueObservation(at=100.0, backlog={}, workers=workers), page, 2)
    d = got.as_dict()
    assert (got.ids, got.page, got.pages, d["first"], d["last"], d["more"]) == expected
    rows = views.worker_rows(QueueObservation(at=100.0, backlog={}, workers=workers),
                             reads.Held(), now=100.0, only=got.ids)
    assert tuple(r["id"] for r in rows) == got.ids
