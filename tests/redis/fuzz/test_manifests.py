"""Fuzz: generated TaskQueue manifests (tests/redis/fuzz/manifests.py) fed to the model loader,
the CRD's schema, the worker (`taskqueue-worker --print-settings -f`, a subprocess) and the CLI
(`taskqueue stats -f`, in-process and a sample as subprocesses).

A manifest is either accepted by the models, and then everything downstream takes it (the
worker's compiled settings and config, the operator's Deployment and its env, the CRD's schema,
a CLI read of the test's Redis), or refused with one line per problem naming where it is, exit
code 2 from the worker and 3 from the CLI, and never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import redis
import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from taskqueue.api import crdgen, manifest, models, workersettings
from taskqueue.controller import workload
from taskqueue.wire import keys
from taskqueue.worker import config as cfg
from tests.fixtures.redis_server import RedisServer
from tests.helpers.cli import console_script
from tests.redis.fuzz import manifests
from tests.redis.fuzz.budget import examples
from tests.redis.fuzz.inprocess import run_cli

ROOT = Path(__file__).resolve().parents[3]
WHERE = ("spec", "metadata", "apiVersion", "kind", "status", "(manifest)", "manifest")
"""How a problem line starts: the field it names (`spec.queues[0].key: String should ...`,
`spec.redis.url must not ...`), or the file (`tq.yaml:3:1: not valid YAML: ...`)."""


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / crdgen.OUTPUT).read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


CRD = jsonschema.Draft4Validator(_crd_schema())
"""OpenAPI v3.0 schemas follow draft 4 (`exclusiveMinimum: true`)."""


@pytest.fixture
def manifest_path(tmp_path: Path) -> Path:
    return tmp_path / "tq.yaml"


@pytest.fixture
def address(redis_server: RedisServer) -> str:
    return f"127.0.0.1:{redis_server.port}"


@pytest.fixture
def flush(redis_server: RedisServer) -> Iterator[Callable[[], object]]:
    """Empty the test's Redis (each example starts from nothing; other tests leave keys)."""
    client = redis.Redis.from_url(redis_server.url)
    yield client.flushall
    client.close()


def _load(path: Path) -> models.TaskQueue | str:
    """The TaskQueue in the file, or the ManifestError's message (any other error fails)."""
    try:
        return manifest.load(path)
    except manifest.ManifestError as exc:
        return str(exc)


def assert_problem_lines(message: str, path: Path) -> None:
    assert message and "Traceback" not in message, message
    for line in message.splitlines():
        assert line.startswith((*WHERE, str(path))), f"not a problem: {line!r} in {message!r}"


def assert_used_downstream(tq: models.TaskQueue, doc: Any) -> None:
    """What the models accept, the worker, the operator and the CRD's schema take too."""
    assert keys.KeySchema.from_spec(tq.spec).collision() is None
    declared = workersettings.read(workersettings.dumps(tq.spec, tls_dir=models.REDIS_TLS_DIR))
    if tq.spec.redis.url is not None:
        cfg.from_declared(declared, worker_id="w1")
    env = {e["name"]: e.get("value") for e in workload.build_deployment(
        tq, uid="u", replicas=1)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert manifest.loads_json(env["TASKQUEUE_MANIFEST"]).spec.model_dump(
        exclude={"scaling", "scaleTargetRef"}) == tq.spec.model_dump(
        exclude={"scaling", "scaleTargetRef"})
    workersettings.read(env[workersettings.ENV])
    errors = sorted(CRD.iter_errors(_pruned(doc)), key=str)
    assert errors == [], errors[0].message


@examples(400)
@given(case=manifests.files())
def test_the_models_accept_what_every_part_takes_or_refuse_in_one_line_per_problem(
        manifest_path: Path, address: str, case: tuple[Any, bytes]) -> None:
    _, data = case
    manifest_path.write_bytes(manifests.with_redis(data, address))
    loaded = _load(manifest_path)
    event("refused" if isinstance(loaded, str) else "accepted")
    if isinstance(loaded, str):
        assert_problem_lines(loaded, manifest_path)
    else:
        assert_used_downstream(loaded, _document(manifests.with_redis(data, address)))


def _pruned(doc: Any) -> Any:
    """`doc` as the API server validates it: a null field is dropped first (no field of the
    CRD is nullable), and `3.0` is an integer (`manifest.as_stored`)."""
    if isinstance(doc, dict):
        return {k: _pruned(v) for k, v in doc.items() if v is not None}
    if isinstance(doc, list):
        return [_pruned(v) for v in doc]
    return manifest.as_stored(doc)


def _document(data: bytes) -> Any:
    """The TaskQueue document of a file the models accepted, as the API server would get it."""
    return next(d for d in yaml.safe_load_all(data.decode())
                if isinstance(d, dict) and d.get("kind") == models.KIND)


CLI_CODES = {0: "ok", 2: "usage", 3: "bad manifest", 4: "Redis unreachable"}
COMMANDS = [("stats", "--interval", "0", "--json"), ("inflight", "--json"),
            ("dlq", "list", "--json"), ("enqueue", "q", "payload")]
"""Each command with a manifest: `-f` goes after the command's name (`dlq list`: both words)."""


def assert_cli_outcome(loaded: models.TaskQueue | str, code: int, err: str) -> None:
    """Exit 3 and the model's problems when the models refuse the file; else 0 (the test's
    Redis), 2 (`enqueue q` where q is no queue of the manifest) or 4 (a closed port), one
    line."""
    assert code in CLI_CODES, (code, err)
    assert "Traceback" not in err, err
    if isinstance(loaded, str):
        assert code == 3, err
        assert err == f"taskqueue: bad manifest: {loaded}\n"
    elif code == 0:
        assert err.count("\n") <= 1, err  # `enqueue` counts what it pushed there
    else:
        assert err.startswith("taskqueue: ") and err.count("\n") == 1, err


@examples(100)
@given(case=manifests.files(), command=st.sampled_from(COMMANDS))
def test_the_cli_reads_a_manifest_or_says_why_not(
        manifest_path: Path, address: str, flush: Callable[[], object],
        case: tuple[Any, bytes], command: tuple[str, ...]) -> None:
    flush()
    _, data = case
    manifest_path.write_bytes(manifests.with_redis(data, address))
    words = 2 if command[0] == "dlq" else 1
    code, out, err = astuple(run_cli(*command[:words], "-f", str(manifest_path),
                                     *command[words:]))
    event(f"exit {code}")
    assert_cli_outcome(_load(manifest_path), code, err)
    if code == 0 and "--json" in command:
        json.loads(out)


@examples(6)
@given(case=manifests.files())
def test_the_worker_process_takes_what_the_models_take(
        manifest_path: Path, address: str, case: tuple[Any, bytes]) -> None:
    _, data = case
    manifest_path.write_bytes(manifests.with_redis(data, address))
    loaded = _load(manifest_path)
    proc = subprocess.run(
        [sys.executable, "-m", "taskqueue.worker.main", "--print-settings", "-f",
         str(manifest_path)], capture_output=True, text=True, timeout=120, check=False,
        cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr
    if isinstance(loaded, str):
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr == f"taskqueue-worker: {loaded}\n"
    else:
        assert (proc.returncode, proc.stderr) == (0, "")
        workersettings.read(proc.stdout)


@examples(4)
@given(case=manifests.files())
def test_the_cli_process_reads_a_manifest_or_says_why_not(
        manifest_path: Path, address: str, flush: Callable[[], object],
        case: tuple[Any, bytes]) -> None:
    flush()
    _, data = case
    manifest_path.write_bytes(manifests.with_redis(data, address))
    proc = subprocess.run([*console_script(), "stats", "-f", str(manifest_path), "--interval",
                           "0"], capture_output=True, text=True, timeout=120, check=False)
    assert_cli_outcome(_load(manifest_path), proc.returncode, proc.stderr)


