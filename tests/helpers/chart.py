"""Helpers of the chart tests: where the chart is, `helm template` arguments and runs, and
picking objects out of what was rendered."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "taskqueue-operator"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
RELEASE = "tq"
NAMESPACE = "tq-system"

Render = Callable[..., list[dict[str, Any]]]


def run_helm(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def template_args(
    values: Sequence[Path] = (), sets: Sequence[str] = (), namespace: str = NAMESPACE
) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace]
    for f in values:
        args += ["-f", str(f)]
    for s in sets:
        args += ["--set", s]
    return args


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]
