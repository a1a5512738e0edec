"""`scripts/images --engine buildah --push REGISTRY`, cold, into a real registry on loopback.

buildah runs with a storage of its own (CONTAINERS_STORAGE_CONF), so nothing is cached from the
podman builds of the other image tests: the local base is imported with `buildah from scratch`,
the wheels are resolved in it with `buildah run`, both images are built and pushed. The pushed
operator image is then pulled back by podman into another empty storage and run. The registry is
plain HTTP on 127.0.0.1, declared insecure in a registries.conf of the test's own
(CONTAINERS_REGISTRIES_CONF), as a user would declare theirs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.registry import Registry, free_port

pytestmark = pytest.mark.timeout(1800)

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "images"
NAMESPACE = "team"


@dataclass
class Store:
    """A private containers storage and the environment that selects it."""

    root: Path
    env: dict[str, str]

    def podman(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)


def _store(root: Path, registry: Registry) -> Store:
    root.mkdir(parents=True)
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n')
    (root / "registries.conf").write_text(
        f'[[registry]]\nlocation = "{registry.address}"\ninsecure = true\n')
    env = dict(os.environ, CONTAINERS_STORAGE_CONF=str(root / "storage.conf"),
               CONTAINERS_REGISTRIES_CONF=str(root / "registries.conf"))
    conf = subprocess.run([str(SCRIPT), "env"], capture_output=True, text=True, check=True)
    for line in conf.stdout.splitlines():
        key, _, value = line.partition("=")
        if key in ("CONTAINERS_CONF", "BUILDAH_RUNTIME") and value:
            env[key] = value
    return Store(root, env)


def _remove(store: Store) -> None:
    store.podman("rm", "-a", "-f", timeout=120)
    store.podman("rmi", "-a", "-f", timeout=120)
    subprocess.run(["buildah", "rm", "--all"], env=store.env, capture_output=True, check=False)
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f if str(store.root) in line.split()[1]]
    for mount in sorted(mounts, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    shutil.rmtree(store.root, ignore_errors=True)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, registry: Registry,
           ) -> Iterator[tuple[Store, Store]]:
    work = tmp_path_factory.mktemp("buildah")
    build, pull = _store(work / "build", registry), _store(work / "pull", registry)
    yield build, pull
    _remove(build)
    _remove(pull)


def images(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), "--engine", "buildah", *args], env=store.env,
                          capture_output=True, text=True, timeout=1500, check=False)


def test_buildah_builds_cold_and_pushes_both_images(stores: tuple[Store, Store],
                                                    registry: Registry) -> None:
    build, pull = stores
    proc = images(build, "--push", f"{registry.address}/{NAMESPACE}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    operator, worker = proc.stdout.split()
    assert "(buildah, base" in proc.stderr
    for image in (operator, worker):
        name, tag = image.split(":")
        assert tag in registry.get(f"/v2/{NAMESPACE}/{name}/tags/list")["tags"]
        pushed = registry.manifest(f"{NAMESPACE}/{name}", tag)["config"]["digest"]
        local = build.podman("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
        assert pushed == f"sha256:{local}", "the registry holds the image buildah built"
    # Pulled back into an empty storage and run as the chart runs it.
    ref = f"{registry.address}/{NAMESPACE}/{operator}"
    pulled = pull.podman("pull", "--quiet", ref)
    assert pulled.returncode == 0, pulled.stderr
    run = pull.podman("run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
                      "--user", "10001:10001", ref, "--help")
    assert run.returncode == 0, run.stderr
    assert "--metrics-port" in run.stdout


def test_push_to_an_unreachable_registry_fails_naming_it(stores: tuple[Store, Store]) -> None:
    build, _ = stores
    port = free_port()  # nothing listens there
    proc = images(build, "--push", f"127.0.0.1:{port}/{NAMESPACE}")
    assert proc.returncode != 0
    assert f"push of 127.0.0.1:{port}/{NAMESPACE}/taskqueue-operator:" in proc.stderr
