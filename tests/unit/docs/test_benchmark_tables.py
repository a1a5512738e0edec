"""docs/benchmarks.md's scaling tables are the committed results: each table under "Default
manifest (poll 2 s)" and "Polling every 5 s" is what `bench/scaling/tables.py` prints from
`results.json` and `results-poll5.json`, so a re-run of `run.py` that is not carried into the
document fails here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "scaling"))

from tables import tables, zero_after

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "benchmarks.md").read_text()


@pytest.mark.parametrize("results, heading", [
    pytest.param("results.json", "### Default manifest (poll 2 s)\n", id="poll-2s"),
    pytest.param("results-poll5.json", "### Polling every 5 s\n", id="poll-5s"),
])
def test_the_documented_tables_are_the_committed_results(results: str, heading: str) -> None:
    printed = tables(json.loads((ROOT / "bench" / "scaling" / results).read_text()))
    section = DOC[DOC.index(heading):]
    for table in printed.strip().split("\n\n"):
        assert table in section[:section.index("\n### ")], f"{results}: {table.splitlines()[0]}"


@pytest.mark.parametrize("unserved, seconds, text", [
    pytest.param(0, 30.4, "30 s", id="back-to-zero"),
    pytest.param(1, None, "never (1 task never completes)", id="one-task-never-served"),
    pytest.param(2, None, "never (2 tasks never complete)", id="tasks-never-served"),
])
def test_zero_after_says_why_a_run_never_reached_zero(unserved: int, seconds: float | None,
                                                      text: str) -> None:
    assert zero_after({"unserved_tasks": unserved, "zero_after_seconds": seconds}) == text
