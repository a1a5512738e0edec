"""The worker's pure rules: when peers may be judged dead, which keys misfit."""

from __future__ import annotations

import pytest

from taskqueue.worker import heartbeat, wrongtype


@pytest.mark.parametrize(
    ("events", "verdicts"),
    [
        pytest.param([("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3)],
                     [False, False, False, True], id="start-up-grace"),
        pytest.param([("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3), ("fail", 4), ("ok", 5),
                      ("ok", 6), ("ok", 7), ("ok", 8)],
                     [False, False, False, True, None, False, False, False, True],
                     id="grace-after-a-failed-beat"),
        pytest.param([("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3), ("ok", 23), ("ok", 24),
                      ("ok", 26)],
                     [False, False, False, True, False, False, True],
                     id="grace-after-a-late-beat"),
        pytest.param([("ok", 0), ("ok", 2), ("ok", 4)], [False, False, True],
                     id="two-periods-apart-is-on-time"),
    ],
)
def test_judge(events: list[tuple[str, float]], verdicts: list[bool | None]) -> None:
    judge = heartbeat.judge_for(1.0)  # grace 3 s, late after 2 s
    seen: list[bool | None] = []
    for what, at in events:
        if what == "ok":
            seen.append(judge.beat_ok(at))
        else:
            judge.beat_failed()
            seen.append(None)
    assert seen == verdicts


@pytest.mark.parametrize(
    ("actual", "found"),
    [
        pytest.param({"q": "list", "d": "zset"}, {}, id="all-fit"),
        pytest.param({"q": "none", "d": "none"}, {}, id="absent-keys-fit"),
        pytest.param({"q": "hash", "d": "zset"}, {"q": "hash"}, id="queue-misfit"),
        pytest.param({"q": "list", "d": "string"}, {"d": "string"}, id="bookkeeping-misfit"),
    ],
)
def test_misfits(actual: dict[str, str], found: dict[str, str]) -> None:
    assert wrongtype.misfits(actual, {"q": "list", "d": "zset"}) == found
