"""The registry of running tasks (`worker.running`), pure state: a task with an id is registered
from `start` to `end` and a cancel reaches it (or waits for it as an early cancel); a task without
an id shares `NO_ID`, which is never registered and keeps no cancel callback."""

from __future__ import annotations

from taskqueue.worker.handlers import TaskContext
from taskqueue.worker.running import NO_ID, RUNNING, Running


def test_a_task_with_an_id_is_registered_until_it_ends_and_a_cancel_reaches_it() -> None:
    running = Running()
    control = running.start("t1")
    heard: list[str] = []
    control.on_cancel(lambda: heard.append("t1"))
    assert running.ids() == ["t1"]
    assert running.cancel("t1") is True
    assert control.cancelled_flag and control.event.is_set() and heard == ["t1"]
    running.end(control)
    assert running.ids() == []


def test_a_cancel_heard_before_the_start_is_applied_at_the_start() -> None:
    running = Running()
    assert running.cancel("t2") is False
    assert running.start("t2").cancelled_flag


def test_a_task_that_reported_progress_is_ended_for_the_progress_writer() -> None:
    control = RUNNING.start("t3")  # a report tells the process's registry
    control.report(0.5, "half")
    assert RUNNING.progress_changes()[0].keys() == {"t3"}
    RUNNING.end(control)
    assert "t3" not in RUNNING.ids() and RUNNING.progress_changes() == ({}, ["t3"])


def test_tasks_without_an_id_share_one_control_that_is_never_registered() -> None:
    running = Running()
    control = running.start("")
    assert control is NO_ID and TaskContext(id="", queue="q", attempt=1).control is NO_ID
    control.on_cancel(lambda: None)
    control.report(1.0, "done")
    assert NO_ID._callbacks == () and running.ids() == []
    assert running.progress_changes() == ({}, [])
    assert running.cancel("") is False and not NO_ID.cancelled_flag
