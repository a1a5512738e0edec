"""A worker pod reads the settings the operator compiled (`TASKQUEUE_WORKER_SETTINGS`) without
pydantic, and gets exactly the config the validated manifest gives."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from taskqueue.api import models, workersettings
from taskqueue.controller import workload
from taskqueue.wire import keys
from taskqueue.worker import command
from taskqueue.worker.config import WorkerConfig
from tests.helpers.worker import pod_env

BASE: dict[str, Any] = {
    "redis": {"url": "redis://127.0.0.1:6379/0"},
    "queues": [{"key": "{jobs}:high"}, {"key": "{jobs}:low"}],
    "worker": {"handler": "taskqueue.worker.builtin:noop"},
}
SPECS: dict[str, dict[str, Any]] = {
    "minimal": {},
    "zset-and-starvation": {"queues": [{"key": "{jobs}:vip", "starvationLimit": 5},
                                       {"key": "{jobs}:later", "type": "zset"}]},
    "retry-and-dead-letter": {"retry": {"maxAttempts": 7, "backoffSeconds": 0.5,
                                        "maxBackoffSeconds": 60, "deadLetterKey": "{jobs}:dlq",
                                        "deadLetterMaxLength": 250},
                              "keyPrefix": "{jobs}:bk"},
    "command-handler": {"worker": {"command": ["python", "-c", "pass"], "concurrency": 4,
                                   "prefetch": 8, "taskTimeoutSeconds": 2.5,
                                   "heartbeatSeconds": 1, "terminationGracePeriodSeconds": 9,
                                   "metricsPort": 9100,
                                   "idempotency": {"windowSeconds": 3600}}},
    "at-most-once": {"delivery": "AtMostOnce"},
    "durable": {"redis": {"url": "redis://127.0.0.1:6379/0", "waitForReplicas": 1}},
    "sentinel-with-tls": {"redis": {
        "url": "rediss://user@ignored:6379/2",
        "sentinel": {"masterName": "mymaster", "addresses": ["s-0:26379", "s-1:26379"]},
        "tls": {"secretName": "redis-tls", "certKey": "tls.crt", "keyKey": "tls.key"}}},
    "cluster": {"redis": {"url": "redis://seed-0:6379", "mode": "cluster"}},
    "url-from-a-secret": {"redis": {"urlSecretRef": {"name": "redis", "key": "url"}}},
}


def _taskqueue(overrides: dict[str, Any]) -> models.TaskQueue:
    spec = {**BASE, **overrides}  # a worker section given replaces the handler too
    return models.TaskQueue.model_validate({
        "apiVersion": models.API_VERSION, "kind": models.KIND,
        "metadata": {"name": "jobs", "namespace": "default"}, "spec": spec})


def _config(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *argv: str) -> WorkerConfig:
    for name in ("TASKQUEUE_MANIFEST", workersettings.ENV, "TASKQUEUE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return command.config_from(command.parser().parse_args(["--worker-id", "w1", *argv]))


@pytest.mark.parametrize("overrides", [pytest.param(v, id=k) for k, v in SPECS.items()])
def test_the_compiled_settings_give_the_config_the_validated_manifest_gives(
        monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any]) -> None:
    env = pod_env(_taskqueue(overrides))
    if "urlSecretRef" in overrides.get("redis", {}):
        env["TASKQUEUE_REDIS_URL"] = "redis://:secret@10.0.0.9:6380/3"
    manifest_only = {k: v for k, v in env.items() if k != workersettings.ENV}
    from_manifest = _config(monkeypatch, manifest_only)
    compiled = _config(monkeypatch, env)
    assert compiled == from_manifest
    spec = _taskqueue(overrides).spec  # and each value is the spec's own, read independently
    w, retry = spec.worker, spec.retry
    assert compiled.schema == keys.KeySchema.from_spec(spec)
    assert compiled.schema.dead_letter_max_length == retry.deadLetterMaxLength
    assert (compiled.delivery, compiled.handler, compiled.concurrency, compiled.prefetch,
            compiled.max_attempts, compiled.backoff_seconds, compiled.max_backoff_seconds,
            compiled.task_timeout, compiled.heartbeat_seconds, compiled.grace_seconds,
            compiled.metrics_port, compiled.wait_replicas) == (
        spec.delivery, w.handler, w.concurrency, w.prefetch, retry.maxAttempts,
        retry.backoffSeconds, retry.maxBackoffSeconds, w.taskTimeoutSeconds,
        w.heartbeatSeconds, w.terminationGracePeriodSeconds, w.metricsPort,
        spec.redis.waitForReplicas)


def test_the_compiled_settings_carry_every_declared_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch, pod_env(_taskqueue(SPECS["command-handler"])))
    assert (config.command, config.concurrency, config.prefetch, config.task_timeout,
            config.heartbeat_seconds, config.grace_seconds, config.metrics_port,
            config.idempotency_window) == (("python", "-c", "pass"), 4, 8, 2.5, 1.0, 9.0, 9100,
                                           3600.0)
    tls = _config(monkeypatch, pod_env(_taskqueue(SPECS["sentinel-with-tls"])))
    assert tls.redis_url.startswith("rediss+sentinel://user@s-0:26379,s-1:26379/mymaster/2?")
    assert "ssl_certfile=%2Fetc%2Ftaskqueue%2Fredis-tls%2Ftls.crt" in tls.redis_url


@pytest.mark.parametrize("stale", [
    pytest.param(json.dumps({"format": "taskqueue.dev/worker-settings/v0"}), id="older-format"),
    pytest.param("{not json", id="not-json"),
    pytest.param(json.dumps({"format": workersettings.FORMAT, "redis": {}}),
                 id="missing-fields"),
    pytest.param(json.dumps(["a", "list"]), id="not-a-mapping"),
])
def test_settings_of_another_format_fall_back_to_the_manifest(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, stale: str) -> None:
    env = pod_env(_taskqueue(SPECS["retry-and-dead-letter"]))
    caplog.set_level(logging.INFO)
    config = _config(monkeypatch, {**env, workersettings.ENV: stale})
    assert config.max_attempts == 7 and config.schema.dead_letter == "{jobs}:dlq"
    assert f"{workersettings.ENV} not used" in caplog.text


@pytest.mark.parametrize(("argv", "check"), [
    pytest.param(["--concurrency", "3"], lambda c: c.concurrency == 3, id="concurrency"),
    pytest.param(["--queue", "{other}:q"], lambda c: c.schema.queue_keys == ("{other}:q",),
                 id="queues"),
    pytest.param(["--max-attempts", "2"], lambda c: c.max_attempts == 2, id="retry"),
    pytest.param(["--dead-letter-max-length", "5"],
                 lambda c: c.schema.dead_letter_max_length == 5, id="dead-letter-cap"),
])
def test_a_flag_that_changes_the_spec_validates_the_manifest_with_it(
        monkeypatch: pytest.MonkeyPatch, argv: list[str], check: Any) -> None:
    assert check(_config(monkeypatch, pod_env(_taskqueue({})), *argv))


def test_the_redis_url_flag_applies_to_the_compiled_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch, pod_env(_taskqueue({})), "--redis-url",
                     "redis://10.1.1.1:7000/1")
    assert config.redis_url == "redis://10.1.1.1:7000/1"


def test_a_worker_started_from_compiled_settings_imports_no_pydantic_nor_redis_py() -> None:
    env = {**os.environ, **pod_env(_taskqueue({**SPECS["minimal"]}))}
    heavy = "{'pydantic', 'yaml', 'redis', 'asyncio', 'prometheus_client'}"
    code = ("import sys; from taskqueue.worker import command, runner; command.build([]); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert out.strip() == "[]"


def test_print_settings_compiles_a_manifest_and_flags_for_workers_started_elsewhere(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tq.json"
    path.write_text(workload.manifest_json(_taskqueue(SPECS["zset-and-starvation"])))
    flags = ["-f", str(path), "--concurrency", "3", "--max-attempts", "9"]
    for name in ("TASKQUEUE_MANIFEST", workersettings.ENV, "TASKQUEUE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    assert command.main(["--print-settings", *flags]) == 0
    printed = capsys.readouterr().out.strip()
    assert _config(monkeypatch, {workersettings.ENV: printed}) == _config(monkeypatch, {}, *flags)


def test_print_settings_names_what_is_wrong(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--print-settings", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
