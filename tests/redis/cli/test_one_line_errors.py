"""Every `taskqueue` command, run as the installed console script, reports a manifest or a URL it
cannot use as one line on stderr with its exit code, never a traceback: two names of one Redis
key (a dead-letter list that is also a queue), a number out of range, a file that is not YAML
(file:line:column), an `ssl_*` option of the URL that neither the CLI nor the worker knows (the
worker's own line)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import redis

from tests.redis.worker.procs import run_once
from tests.unit.cli.test_one_line_errors import EVERY_COMMAND, REDIS_COMMANDS, one_line, taskqueue


def manifest(tmp_path: Path, url: str, spec: str) -> Path:
    path = tmp_path / "tq.yaml"
    path.write_text("apiVersion: taskqueue.dev/v1alpha1\nkind: TaskQueue\nmetadata: {name: t}\n"
                    f"spec:\n  redis: {{url: '{url}'}}\n{spec}")
    return path


@pytest.mark.parametrize("argv", EVERY_COMMAND)
def test_the_issue_manifest_is_refused_naming_both_keys(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis, argv: list[str]) -> None:
    path = manifest(tmp_path, redis_url,
                    "  queues: [{key: q}, {key: r}]\n  retry: {deadLetterKey: r}\n")
    assert one_line(taskqueue(*argv, "-f", str(path)), 3) == (
        "taskqueue: bad manifest: spec.queues[1].key 'r' is also spec.retry.deadLetterKey 'r': "
        "dead-letter records would be taken as tasks and fail again; use another "
        "spec.retry.deadLetterKey, e.g. 'q:dead'")
    assert redis_sync.dbsize() == 0


@pytest.mark.parametrize("argv", REDIS_COMMANDS)
def test_colliding_flags_are_a_usage_error(redis_url: str, redis_sync: redis.Redis,
                                           argv: list[str]) -> None:
    line = one_line(taskqueue(*argv, "--redis-url", redis_url, "--queue", "q", "--queue", "r",
                              "--dead-letter-key", "r"), 2)
    assert line.startswith("taskqueue: --queue 'r' is also --dead-letter-key 'r': ")
    assert redis_sync.dbsize() == 0


@pytest.mark.parametrize("argv", [pytest.param(["stats"], id="stats"),
                                  pytest.param(["simulate"], id="simulate")])
def test_a_number_out_of_range_is_one_line_stating_the_range(
        tmp_path: Path, redis_url: str, argv: list[str]) -> None:
    path = manifest(tmp_path, redis_url, "  queues: [{key: q}]\n"
                    "  worker: {terminationGracePeriodSeconds: 10000000000}\n")
    assert one_line(taskqueue(*argv, "-f", str(path)), 3) == (
        "taskqueue: bad manifest: spec.worker.terminationGracePeriodSeconds: 10000000000 is out "
        "of range; use a whole number of seconds from 0 to 604800 (7 days)")


@functools.cache
def _workers_line(url: str) -> str:
    """What `taskqueue-worker --redis-url URL` says (one process per URL, whatever command the
    CLI side runs)."""
    return one_line(run_once("--redis-url", url, "--queue", "q", "--handler",
                             "tests.helpers.handlers:record"), 2)


@pytest.mark.parametrize("query", ["ssl_verify=1", "ssl_cert_reqs=sometimes"])
@pytest.mark.parametrize("argv", REDIS_COMMANDS)
def test_a_tls_option_neither_side_knows_is_the_workers_one_line(
        redis_url: str, argv: list[str], query: str) -> None:
    url = redis_url.replace("redis://", "rediss://") + "?" + query
    cli = one_line(taskqueue(*argv, "--redis-url", url, "--queue", "q"), 2)
    worker = _workers_line(url)
    assert cli.removeprefix("taskqueue: ") == worker.removeprefix("taskqueue-worker: ")
    assert cli.startswith("taskqueue: --redis-url: Redis URL option ssl_")


def test_a_tls_option_on_a_plain_url_is_one_line(redis_url: str) -> None:
    line = one_line(taskqueue("stats", "--redis-url", f"{redis_url}?ssl_ca_certs=/ca.crt",
                              "--queue", "q"), 2)
    assert line == ("taskqueue: --redis-url: Redis URL option ssl_ca_certs needs TLS: use "
                    "rediss:// (rediss+cluster://, rediss+sentinel://)")


def test_a_tls_option_in_the_manifest_is_one_line(tmp_path: Path, redis_url: str) -> None:
    url = redis_url.replace("redis://", "rediss://") + "?ssl_verify=1"
    path = manifest(tmp_path, url, "  queues: [{key: q}]\n")
    line = one_line(taskqueue("stats", "-f", str(path)), 3)
    assert line.startswith("taskqueue: bad manifest: spec.redis: url: Redis URL option ssl_verify "
                           "is not supported; use ssl_ca_certs, ")
