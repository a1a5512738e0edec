"""scripts/demo's choice of mode: the real node when it can run, else the process kubelet."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "demo_node.py"


@pytest.fixture(scope="module")
def demo_node() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_node", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_node"] = module
    spec.loader.exec_module(module)
    return module


NOTHING: list[str] = []
NO_ROOT = ["root (the kubelet and containerd need it)"]


@pytest.mark.parametrize("requested, missing, mode, why", [
    pytest.param("auto", NOTHING, "node", "available", id="auto-node-available"),
    pytest.param("auto", NO_ROOT, "process", "missing: root", id="auto-falls-back"),
    pytest.param("node", NOTHING, "node", "available", id="node-forced"),
    pytest.param("process", NOTHING, "process", "--mode process", id="process-forced"),
    pytest.param("process", NO_ROOT, "process", "--mode process", id="process-without-node"),
])
def test_choose_mode(demo_node: ModuleType, requested: str, missing: list[str], mode: str,
                     why: str) -> None:
    chosen, reason = demo_node.choose_mode(requested, missing)
    assert chosen == mode
    assert why in reason


def test_node_forced_where_it_cannot_run_names_what_is_missing(demo_node: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"--mode node: .*missing: root"):
        demo_node.choose_mode("node", NO_ROOT)


def test_every_mode_is_described(demo_node: ModuleType) -> None:
    assert set(demo_node.MODE_TEXT) == set(demo_node.MODES) - {"auto"}
