"""Every `taskqueue` command, run as the installed console script, reports a manifest or a URL it
cannot use as one line on stderr with its exit code, never a traceback: two names of one Redis
key (a dead-letter list that is also a queue), a number out of range, a file that is not YAML
(file:line:column), a DSN of the wrong shape (a sentinel URL without a master, several hosts of
one server, a database other than 0 on a Redis Cluster), checked before anything connects."""

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


@pytest.mark.parametrize(("url", "problem"), [
    pytest.param("redis+sentinel://s1:26379", "name the master", id="sentinel-without-master"),
    pytest.param("redis://a:6379,b:6379/0", "several hosts", id="several-hosts"),
    pytest.param("redis+cluster://{q}:7000/2", "Redis Cluster has only database 0",
                 id="cluster-database"),
])
def test_a_dsn_of_the_wrong_shape_is_one_line_naming_the_flag(url: str, problem: str) -> None:
    assert one_line(taskqueue("stats", "--redis-url", url, "--queue", "q"), 2).startswith(
        f"taskqueue: --redis-url: {problem}")


@pytest.mark.parametrize("argv", REDIS_COMMANDS)
def test_every_command_checks_the_dsn_before_it_connects(argv: list[str]) -> None:
    result = taskqueue(*argv, "--redis-url", "redis+sentinel://s1:26379", "--queue", "q")
    assert one_line(result, 2).startswith("taskqueue: --redis-url: name the master")


def test_the_dsn_of_the_manifests_topology_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text("kind: TaskQueue\nspec:\n  queues: [{key: '{q}'}]\n  worker: {image: w, "
                    "handler: m:f}\n  redis: {url: 'redis://r:6379/3', mode: cluster}\n")
    assert one_line(taskqueue("stats", "-f", str(path)), 3).startswith(
        "taskqueue: spec.redis: Redis Cluster has only database 0")
