"""Errors are one line on stderr with a distinct exit code, never a traceback."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from taskqueue.cli import ui
from taskqueue.cli.errors import CliError
from tests.fixtures.redis_server import free_port
from tests.helpers.cli import Run
from tests.helpers.hangup import hanging_up

UNREACHABLE = [
    pytest.param(["stats", "--queue", "jobs"], id="stats"),
    pytest.param(["stats", "--queue", "jobs", "--watch", "--iterations", "3"], id="stats-watch"),
    pytest.param(["enqueue", "jobs", "x"], id="enqueue"),
    pytest.param(["inflight", "--queue", "jobs"], id="inflight"),
    pytest.param(["dlq", "list", "--queue", "jobs"], id="dlq-list"),
    pytest.param(["dlq", "requeue", "--queue", "jobs", "--all"], id="dlq-requeue"),
    pytest.param(["drain", "jobs", "--yes"], id="drain"),
]


@pytest.mark.parametrize("argv", UNREACHABLE)
def test_unreachable_redis_exits_4(cli: Run, argv: list[str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    result = cli(*argv, "--redis-url", url)
    assert result.code == 4
    assert result.err.startswith(f"taskqueue: cannot reach Redis at {url}: ")
    assert "Traceback" not in result.err
    assert result.err.count("\n") == 1


@pytest.mark.parametrize("argv", UNREACHABLE)
def test_a_redis_that_never_answered_is_tried_once(cli: Run, argv: list[str]) -> None:
    """A first contact that fails is reported at once (a wrong URL, a port-forward that is not
    running): no retry, which would leave the user waiting seconds for the same answer."""
    with hanging_up() as redis_that_hangs_up:
        result = cli(*argv, "--redis-url", redis_that_hangs_up.url)
    assert result.code == 4, result.err
    assert result.err.startswith(f"taskqueue: cannot reach Redis at {redis_that_hangs_up.url}: ")
    assert redis_that_hangs_up.accepted == 1


def test_the_password_is_not_printed(cli: Run) -> None:
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    result = cli("stats", "--queue", "jobs", "--redis-url", url)
    assert result.code == 4
    assert "s3cret" not in result.err
    assert "redis://user:***@127.0.0.1" in result.err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '{"kind": "TaskQueue", "spec": {"redis": {"url": "redis://x"}, "queues": []}}',
            "bad manifest: spec.queues: List should have at least 1 item", id="no-queues"),
        pytest.param(
            '{"kind": "TaskQueue", "spec": {"redis": {}, "queues": [{"key": "q"}]}}',
            "bad manifest: spec.redis: set exactly one of url or urlSecretRef", id="no-redis"),
        pytest.param("kind: Deployment\n", "bad manifest: ", id="not-a-taskqueue"),
        pytest.param("a: [", "bad manifest: ", id="not-yaml"),
    ],
)
def test_bad_manifest_exits_3_naming_the_field(
    cli: Run, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text(text)
    result = cli("stats", "-f", str(path))
    assert result.code == 3
    assert result.err.startswith(f"taskqueue: {message}")
    assert "Traceback" not in result.err


def test_missing_manifest_file(cli: Run, tmp_path: Path) -> None:
    result = cli("stats", "-f", str(tmp_path / "nope.yaml"))
    assert result.code == 3
    assert result.err.startswith("taskqueue: cannot read manifest: ")


def test_a_url_in_a_secret_needs_redis_url_or_the_cluster(
    cli: Run, tmp_path: Path
) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text('{"kind": "TaskQueue", "spec": {"queues": [{"key": "q"}], '
                    '"redis": {"urlSecretRef": {"name": "redis", "key": "url"}}}}')
    result = cli("stats", "-f", str(path))
    assert result.code == 2
    assert "the Redis URL is in Secret 'redis' (key 'url'); pass --redis-url" in result.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["stats"], "stats needs a TaskQueue: pass -f FILE", id="no-target"),
        pytest.param(["inflight", "-f", "x", "--name", "y"], "use -f FILE or --name NAME",
                     id="file-and-name"),
        pytest.param(["stats", "-f", "x", "--queue", "q"], "describe a TaskQueue without",
                     id="file-and-flags"),
        pytest.param(["stats", "--queue", "has space"], "not a valid key", id="bad-key"),
        pytest.param(["stats", "--queue", "q", "--watch", "--interval", "0"],
                     "--interval must be > 0 with --watch", id="watch-interval"),
    ],
)
def test_usage_errors_exit_2(cli: Run, argv: list[str], message: str) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert message in result.err


def test_an_unreadable_kubeconfig_exits_3(cli: Run, tmp_path: Path) -> None:
    result = cli("stats", "--name", "thumbs", "--kubeconfig", str(tmp_path / "missing"))
    assert result.code == 3
    assert result.err.startswith("taskqueue: kubeconfig: ")


def test_an_unreachable_api_server_exits_3(cli: Run, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    result = cli("stats", "--name", "thumbs", "-n", "media", "--kubeconfig", str(kubeconfig))
    assert result.code == 3
    assert result.err.startswith("taskqueue: cannot reach the Kubernetes API: ")
    assert "Traceback" not in result.err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from taskqueue.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["nosuchcommand"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("answer", "confirmed"),
    [
        pytest.param("y\n", True, id="y"),
        pytest.param("yes\n", True, id="yes"),
        pytest.param("\n", False, id="default-no"),
        pytest.param("n\n", False, id="n"),
    ],
)
def test_confirm_on_a_terminal(answer: str, confirmed: bool) -> None:
    def ask() -> None:
        return ui.confirm("Delete?", yes=False, stdin=_Terminal(answer))
    if confirmed:
        ask()
    else:
        with pytest.raises(CliError, match="aborted: nothing was changed") as exc:
            ask()
        assert exc.value.code == 6


def test_an_unparsable_url_is_named_not_quoted(cli: Run) -> None:
    # a base64 password with '/' unencoded: the parser reads 'Zm9v' as the port
    result = cli("stats", "--queue", "jobs", "--redis-url", "redis://:Zm9v/YmFy@127.0.0.1:1/0")
    assert result.code == 2
    assert result.err.startswith("taskqueue: --redis-url: port is not a number from 0 to 65535 "
                                 "(percent-encode any '/'")
    assert "Zm9v" not in result.err and "YmFy" not in result.err
    assert result.err.count("\n") == 1
