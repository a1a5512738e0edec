"""Settings the worker cannot use stop it at start with one line on stderr and exit 2, before it
touches Redis: numbers beyond what it can wait for or expire (`terminationGracePeriodSeconds:
10000000000` crashed SIGTERM with tasks left in the processing list, `.inf` timeouts failed
every task or the start), and a manifest that is not YAML (one line naming the file, the line
and the column, not PyYAML's eight)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from tests.redis.worker.procs import run_once
from tests.redis.worker.test_key_collisions import write_manifest


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.rstrip("\n")


@pytest.mark.parametrize("worker, line", [
    pytest.param("terminationGracePeriodSeconds: 10000000000",
                 "spec.worker.terminationGracePeriodSeconds: 10000000000 is out of range; use a "
                 "whole number of seconds from 0 to 604800 (7 days)", id="grace-1e10"),
    pytest.param("taskTimeoutSeconds: .inf",
                 "spec.worker.taskTimeoutSeconds: inf is out of range; use a number of seconds > "
                 "0 and <= 604800 (7 days)", id="task-timeout-inf"),
    pytest.param("idempotency: {windowSeconds: .inf}",
                 "spec.worker.idempotency.windowSeconds: inf is out of range; use a number of "
                 "seconds from 1 to 31536000 (365 days)", id="idempotency-window-inf"),
    pytest.param("heartbeatSeconds: .nan",
                 "spec.worker.heartbeatSeconds: nan is out of range; use a number of seconds "
                 "from 0.1 to 300 (5 minutes)", id="heartbeat-nan"),
])
def test_a_number_the_worker_cannot_use_is_refused_stating_the_range(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis, worker: str, line: str) -> None:
    path = write_manifest(tmp_path, redis_url, "  queues: [{key: q}]\n")
    path.write_text(path.read_text().replace("worker: {", f"worker: {{{worker}, "))
    assert one_line(run_once("-f", str(path))) == f"taskqueue-worker: {line}"
    assert redis_sync.dbsize() == 0


@pytest.mark.parametrize("flags, line", [
    pytest.param(["--grace", "1e10"], "--grace: 1e+10 is out of range; use a number of seconds "
                 "from 0 to 604800 (7 days)", id="grace"),
    pytest.param(["--grace", "nan"], "--grace: nan is out of range", id="grace-nan"),
    pytest.param(["--task-timeout", "inf"], "spec.worker.taskTimeoutSeconds: inf is out of range",
                 id="task-timeout"),
    pytest.param(["--idempotency-window", "inf"],
                 "spec.worker.idempotency.windowSeconds: inf is out of range",
                 id="idempotency-window"),
])
def test_a_flag_the_worker_cannot_use_is_refused_stating_the_range(
        redis_url: str, redis_sync: redis.Redis, flags: list[str], line: str) -> None:
    result = run_once("--redis-url", redis_url, "--queue", "q", "--handler",
                        "tests.helpers.handlers:record", *flags)
    assert one_line(result).startswith(f"taskqueue-worker: {line}")
    assert redis_sync.dbsize() == 0


@pytest.mark.parametrize("text, line", [
    pytest.param("kind: TaskQueue\nspec:\n  queues: [a\n  b: c\n",
                 "tq.yaml:4:4: not valid YAML: expected ',' or ']', but got ':' (while parsing "
                 "a flow sequence that starts at line 3, column 11)", id="unclosed-flow"),
    pytest.param("kind: TaskQueue\nspec:\n\tqueues: []\n",
                 "tq.yaml:3:1: not valid YAML: found character '\\t' that cannot start any token "
                 "(while scanning for the next token)", id="tab-indent"),
    pytest.param("kind: TaskQueue\nspec: {a: \x07}\n",
                 "tq.yaml:2:11: not valid YAML: character #x0007 is not allowed (special "
                 "characters are not allowed)", id="control-character"),
    pytest.param("kind: TaskQueue\nspec: *nowhere\n",
                 "tq.yaml:2:7: not valid YAML: found undefined alias 'nowhere'",
                 id="undefined-alias"),
])
def test_a_manifest_that_is_not_yaml_is_one_line_naming_file_line_and_column(
        tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text(text)
    assert one_line(run_once("-f", str(path))) == f"taskqueue-worker: {tmp_path}/{line}"


def test_a_manifest_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tq.yaml"
    path.write_bytes(b"kind: TaskQueue\nspec: \xff\n")
    assert one_line(run_once("-f", str(path))) == (
        f"taskqueue-worker: {path}: not UTF-8 text (byte 22); save it as UTF-8")
