"""Fixtures of the chart tests: the helm binary of the control-plane cache and `render`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskqueue_devcluster import BinariesNotBuiltError, find_bin_dir
from tests.helpers.chart import NAMESPACE, Render, run_helm, template_args


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary cached by `scripts/control-plane build`; fails loudly when it is missing."""
    try:
        return find_bin_dir() / "helm"
    except BinariesNotBuiltError as e:
        pytest.fail(f"helm is not available: {e}", pytrace=False)


@pytest.fixture
def render(helm: Path) -> Render:
    """`render(values=[...], sets=[...], tests=False)` -> the rendered objects, as dicts."""

    def _render(
        values: Sequence[Path] = (),
        sets: Sequence[str] = (),
        *,
        namespace: str = NAMESPACE,
        tests: bool = False,
    ) -> list[dict[str, Any]]:
        args = template_args(values, sets, namespace)
        if not tests:
            args.append("--skip-tests")
        out = run_helm(helm, *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    return _render
