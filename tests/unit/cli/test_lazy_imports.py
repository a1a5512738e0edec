"""`taskqueue` imports a command's modules only when that command is named: `taskqueue --help`
loads neither redis-py nor pydantic nor the simulator, and each command loads only what it uses
(no pydantic without a manifest, no simulator outside `simulate`, no Kubernetes client without
`--name`). Checked in a fresh interpreter: the modules it has loaded once the command is done."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

REDIS = ("redis",)
PYDANTIC = ("pydantic", "taskqueue.api.models")
SIMULATOR = ("taskqueue.simulate.run", "taskqueue.simulate.world", "taskqueue.scaling.policy")
KUBERNETES = ("kubernetes",)

PROGRAM = """
import json, sys
from taskqueue.cli import main
try:
    main.main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""


def loaded(*argv: str) -> set[str]:
    """The modules a `taskqueue` run with `argv` has imported when it ends."""
    proc = subprocess.run([sys.executable, "-c", PROGRAM, *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    return set(json.loads(proc.stderr[proc.stderr.rfind("\n") + 1:]))  # after any error line


@pytest.mark.parametrize(("argv", "unloaded"), [
    pytest.param(["--help"], REDIS + PYDANTIC + SIMULATOR + KUBERNETES, id="help"),
    pytest.param([], REDIS + PYDANTIC + SIMULATOR + KUBERNETES, id="no-command"),
    pytest.param(["bogus"], REDIS + PYDANTIC + SIMULATOR + KUBERNETES, id="unknown-command"),
    pytest.param(["simulate", "--help"], REDIS + PYDANTIC + SIMULATOR + KUBERNETES,
                 id="simulate-help"),
    pytest.param(["stats", "--help"], PYDANTIC + SIMULATOR + KUBERNETES, id="stats-help"),
    pytest.param(["enqueue", "--help"], PYDANTIC + SIMULATOR + KUBERNETES, id="enqueue-help"),
    pytest.param(["dlq", "requeue", "--help"], PYDANTIC + SIMULATOR + KUBERNETES,
                 id="dlq-help"),
    pytest.param(["inflight", "--redis-url", "redis://127.0.0.1:1/0", "--queue", "q"],
                 PYDANTIC + SIMULATOR + KUBERNETES, id="a-command-given-flags"),
    pytest.param(["simulate", "--from-history", "q", "--current", "/nonexistent.yaml", "-f",
                  "/nonexistent.yaml"], KUBERNETES, id="from-history-given-a-manifest"),
])
def test_a_command_loads_only_what_it_uses(argv: list[str], unloaded: tuple[str, ...]) -> None:
    found = loaded(*argv)
    assert "taskqueue.cli.main" in found  # the program ran
    assert sorted(found & set(unloaded)) == []
