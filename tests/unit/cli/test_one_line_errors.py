"""Every `taskqueue` command, run as the installed console script, reports a manifest or a URL it
cannot use as one line on stderr with its exit code, never a traceback: two names of one Redis
key (a dead-letter list that is also a queue), a number out of range, a file that is not YAML
(file:line:column), an `ssl_*` option of the URL that neither the CLI nor the worker knows (the
worker's own line)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REDIS_COMMANDS = [
    pytest.param(["stats"], id="stats"),
    pytest.param(["inflight"], id="inflight"),
    pytest.param(["dlq", "list"], id="dlq-list"),
    pytest.param(["dlq", "requeue", "--all"], id="dlq-requeue"),
    pytest.param(["dlq", "purge", "--yes"], id="dlq-purge"),
    pytest.param(["drain", "q", "--yes"], id="drain"),
    pytest.param(["enqueue", "q", "x"], id="enqueue"),
]
EVERY_COMMAND = [*REDIS_COMMANDS, pytest.param(["simulate"], id="simulate")]


def taskqueue(*argv: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("taskqueue")
    command = [exe] if exe else [sys.executable, "-m", "taskqueue.cli.main"]
    return subprocess.run([*command, *argv], capture_output=True, text=True, timeout=60,
                          check=False)


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.rstrip("\n")


@pytest.mark.parametrize("argv", EVERY_COMMAND)
def test_a_manifest_that_is_not_yaml_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text("kind: TaskQueue\nspec:\n  queues: [a\n  b: c\n")
    assert one_line(taskqueue(*argv, "-f", str(path)), 3) == (
        f"taskqueue: bad manifest: {path}:4:4: not valid YAML: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence that starts at line 3, column 11)")
