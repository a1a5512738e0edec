"""Fixtures for the image tests: the two images built once per session by `scripts/images`.

The tests use a real engine (docker, podman or buildah, whichever `scripts/images` picks) and FAIL,
never skip, when the images cannot be built or run: shipping images that were never run is what
these tests exist to prevent.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "images"


@dataclass
class Engine:
    """The engine `scripts/images` used, with its environment (CONTAINERS_CONF for podman)."""

    name: str
    env: dict[str, str]
    operator_image: str
    worker_image: str
    containers: list[str] = field(default_factory=list)

    def run(self, *args: str, check: bool = True, timeout: float = 300,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [self.cli, *args]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=timeout, input=input)
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}",
                        pytrace=False)
        return proc

    @property
    def cli(self) -> str:
        """buildah builds but cannot run containers; podman (same storage) runs them."""
        return "podman" if self.name == "buildah" else self.name

    def start(self, image: str, *args: str, run_args: Sequence[str] = ()) -> str:
        """`run -d` with the pod's hardening (read-only root, no capabilities, host network)."""
        name = f"tq-test-{uuid.uuid4().hex[:8]}"
        self.run("run", "-d", "--name", name, "--network", "host", "--read-only",
                 "--cap-drop", "ALL", "--security-opt", "no-new-privileges", *run_args,
                 image, *args)
        self.containers.append(name)
        return name

    def logs(self, name: str) -> str:
        proc = self.run("logs", name, check=False)
        return proc.stdout + proc.stderr

    def exit_code(self, name: str) -> int:
        out = self.run("wait", name, timeout=120).stdout.strip().splitlines()
        return int(out[-1])

    def remove_all(self) -> None:
        for name in self.containers:
            self.run("rm", "-f", name, check=False)
        self.containers.clear()


def _script_env() -> dict[str, str]:
    proc = subprocess.run([str(SCRIPT), "env"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/images env failed: {proc.stderr}", pytrace=False)
    pairs = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return pairs


@pytest.fixture(scope="session")
def engine() -> Engine:
    """Build both images (cached layers make a rebuild take seconds) and describe the engine."""
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"scripts/images failed ({proc.returncode}):\n{proc.stderr[-4000:]}",
                    pytrace=False)
    built = proc.stdout.split()
    info = _script_env()
    env = dict(os.environ)
    for key in ("CONTAINERS_CONF", "BUILDAH_RUNTIME"):
        if info.get(key):
            env[key] = info[key]
    eng = Engine(name=info["ENGINE"], env=env, operator_image=info["OPERATOR_IMAGE"],
                 worker_image=info["WORKER_IMAGE"])
    assert built == [eng.operator_image, eng.worker_image], proc.stdout
    return eng


@pytest.fixture
def containers(engine: Engine) -> Iterator[Engine]:
    """The engine; every container a test starts is removed afterwards."""
    yield engine
    engine.remove_all()
