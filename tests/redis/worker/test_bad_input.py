"""Bad input gets a one-line error (exit 2) naming the setting, never a traceback; a queue key
holding the wrong type is named in the log and skipped while the other queues are served."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from tests.helpers.wait import wait_for
from tests.redis.worker.procs import run_once, running, spawn

HANDLERS = "tests.helpers.handlers"


def _manifest(tmp_path: Path, worker: str, url: str = "redis://127.0.0.1:1/0") -> Path:
    path = tmp_path / "tq.yaml"
    path.write_text(
        "apiVersion: taskqueue.dev/v1alpha1\nkind: TaskQueue\nmetadata: {name: demo}\n"
        f"spec:\n  redis: {{url: '{url}'}}\n  queues: [{{key: q}}]\n"
        f"  worker: {{handler: '{HANDLERS}:record'{worker}}}\n")
    return path


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        pytest.param(lambda tmp: tmp / "missing.yaml", "no such file", id="missing-file"),
        pytest.param(lambda tmp: tmp, "is a directory", id="directory"),
    ],
)
def test_unreadable_manifest_file(tmp_path: Path, make_path: object, message: str) -> None:
    path = make_path(tmp_path)  # type: ignore[operator]
    line = _one_line_error(run_once("-f", str(path)))
    assert line == f"taskqueue-worker: -f {path}: {message}" or line.startswith(
        f"taskqueue-worker: -f {path}: {message}")


# a manifest is a TaskQueue: its model refuses these first (a password belongs in a Secret)
MANIFEST_PROBLEMS = {
    "port is not a number": "spec.redis.url must not carry a password",
    "host is missing": "spec.redis: url: host is missing",
    "database": "spec.redis: url: database (the path after the port) is not a number",
}


@pytest.mark.parametrize(
    ("url", "problem", "secret"),
    [
        pytest.param("redis://:s3cr/et@localhost:6379/0", "port is not a number", "s3cr",
                     id="password-with-slash"),
        pytest.param("redis://user:hunter2@localhost:99999/0", "port is not a number",
                     "hunter2", id="port-out-of-range"),
        pytest.param("redis://localhost:6379/zero", "database", "zero", id="database"),
        pytest.param("redis://:6379/0", "host is missing", "redis://:6379", id="no-host"),
    ],
)
@pytest.mark.parametrize("where", ["flag", "manifest"])
def test_malformed_redis_url(tmp_path: Path, url: str, problem: str, secret: str,
                             where: str) -> None:
    if where == "flag":
        result = run_once("--redis-url", url, "--queue", "q", "--handler", f"{HANDLERS}:record")
        field = "--redis-url"
    else:
        result = run_once("-f", str(_manifest(tmp_path, "", url=url)))
        field = "spec.redis.url"
    line = _one_line_error(result)
    expected = f"{field}: {problem}"
    if where == "manifest":
        expected = MANIFEST_PROBLEMS.get(problem, expected)
    assert line.startswith(f"taskqueue-worker: {expected}")
    assert secret not in line


@pytest.mark.parametrize(
    ("worker", "field"),
    [
        pytest.param(", concurrency: '4'", "spec.worker.concurrency", id="string-for-int"),
        pytest.param(", concurrency: true", "spec.worker.concurrency", id="bool-for-int"),
        pytest.param(", heartbeatSeconds: '5'", "spec.worker.heartbeatSeconds",
                     id="string-for-number"),
        pytest.param(", command: './run.sh'", "spec.worker.command", id="string-for-list"),
    ],
)
def test_manifest_types_are_strict(tmp_path: Path, worker: str, field: str) -> None:
    line = _one_line_error(run_once("-f", str(_manifest(tmp_path, worker))))
    assert line.startswith(f"taskqueue-worker: {field}: ")


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
@pytest.mark.parametrize("when", ["at-start", "while-running"])
def test_wrong_type_queue_key_is_named_and_skipped(tmp_path: Path, redis_url: str,
                                                   redis_sync: redis.Redis, delivery: str,
                                                   when: str) -> None:
    log = tmp_path / "w.log"
    if when == "at-start":
        redis_sync.hset("hi", "field", "value")
    with running(redis_url, "--queue", "hi", "--queue", "lo", "--delivery", delivery,
                 "--handler", f"{HANDLERS}:record", "--worker-id", "k1", log_path=log):
        if when == "while-running":
            wait_for("redis_sync.zscore('hi:workers', 'k1')",
                     lambda: redis_sync.zscore("hi:workers", "k1"), timeout=15)
            redis_sync.hset("hi", "field", "value")
        redis_sync.lpush("lo", "l1", "l2")
        wait_for("redis_sync.llen('test:done') == 2",
                 lambda: redis_sync.llen("test:done") == 2, timeout=15)
        assert "queue key 'hi' holds a hash, not a list" in log.read_text()
        # fixed: served again after the re-check
        redis_sync.delete("hi")
        redis_sync.lpush("hi", "h1")
        wait_for("redis_sync.llen('test:done') == 3",
                 lambda: redis_sync.llen("test:done") == 3, timeout=15)
    assert sorted(redis_sync.lrange("test:done", 0, -1)) == ["h1", "l1", "l2"]
    assert "Traceback" not in log.read_text()


def test_url_scheme_is_checked_where_it_was_given(tmp_path: Path) -> None:
    line = _one_line_error(run_once("--redis-url", "http://localhost:6379", "--queue", "q",
                                "--handler", f"{HANDLERS}:record"))
    assert line.startswith("taskqueue-worker: --redis-url: scheme must be redis://")
    line = _one_line_error(run_once("-f", str(_manifest(tmp_path, "", url="http://h:6379"))))
    assert line.startswith("taskqueue-worker: spec.redis: url")  # the model's own check


def test_spawn_helper_still_reports_bad_settings(redis_url: str) -> None:
    proc = spawn(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:record",
                 "--redis-url", "redis://:x/y@h:1/0")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.decode().count("\n") == 1
