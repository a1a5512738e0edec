"""Fixtures of the CLI tests: run `main(argv)` in-process and write TaskQueue manifests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from taskqueue.cli.main import main
from tests.helpers.cli import Result, Run


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """`cli("stats", "--json", ...)` -> Result(code, stdout, stderr)."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def manifest_file(tmp_path: Path, redis_url: str) -> Callable[..., str]:
    """Write a TaskQueue manifest on the test's Redis; returns its path."""

    def write(queues: list[dict[str, Any]] | None = None, **spec: Any) -> str:
        doc = {
            "apiVersion": "taskqueue.dev/v1alpha1",
            "kind": "TaskQueue",
            "metadata": {"name": "thumbs", "namespace": "media"},
            "spec": {"redis": {"url": redis_url},
                     "queues": queues or [{"key": "vip"}, {"key": "normal"}], **spec},
        }
        path = tmp_path / "taskqueue.yaml"
        path.write_text(json.dumps(doc))
        return str(path)

    return write
