"""Root pytest configuration: the shared fixture plugins (real Redis, control plane, images, and
`tests.fixtures.hygiene`: per-test hygiene of process-wide state) and the test tiers.

Every test lives in the folder of its tier, and the folder marks it (`unit`, `redis`, `cluster`,
`node`: `pytest -m unit`, `scripts/test --fast` for the first two). A test that uses a fixture
of a higher tier than its folder's fails the collection, naming the fixture and the folder it
belongs in, so that the fast tiers never start a control plane or a node (tests/README.md).
"""

import signal
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.redis_server", "tests.fixtures.redis_tls", "tests.fixtures.redis_cluster",
    "tests.fixtures.cluster",
    "tests.fixtures.operator",
    "tests.fixtures.images",
    "tests.fixtures.registry",
    "tests.fixtures.worker",
    "tests.fixtures.cli",
    "tests.fixtures.processes",
    "tests.fixtures.browser",
    "tests.fixtures.hygiene",
    "pytester",
]

TIERS = ("unit", "redis", "cluster", "node")
"""The tiers, cheapest first: a tier's tests may use the fixtures of its own and lower tiers."""

FIXTURE_TIERS: dict[str, str] = {
    # real redis-server processes (standalone, Cluster, Sentinel, TLS)
    "redis_server": "redis",
    "redis_factory": "redis",
    "tls_redis": "redis",
    "redis_cluster": "redis",
    "tls_cluster": "redis",
    "own_cluster": "redis",
    "sentinel_group": "redis",
    "tls_sentinel_group": "redis",
    # the local control plane and the binaries `scripts/control-plane build` caches
    "control_plane": "cluster",
    "helm": "cluster",
    # a real node, the images, the local registry
    "engine": "node",
    "registry": "node",
    "node_cluster": "node",
}
"""The fixtures that start something, by the tier they need; every fixture that uses one of these
(redis_url, make_worker, namespace, run_operator, ...) is in `item.fixturenames` with it."""

TESTS = Path(__file__).resolve().parent


def tier_problem(*, folder: str, fixtures: list[str]) -> str | None:
    """Why a test in `tests/<folder>/` may not use `fixtures` (None when it may). Pure."""
    if folder not in TIERS:
        return (f"is not in a tier folder: move it to tests/<tier>/<topic>/, tier one of "
                f"{', '.join(TIERS)}")
    rank = TIERS.index(folder)
    above = sorted((name, FIXTURE_TIERS[name]) for name in fixtures
                   if name in FIXTURE_TIERS and TIERS.index(FIXTURE_TIERS[name]) > rank)
    if not above:
        return None
    needed = max((tier for _, tier in above), key=TIERS.index)
    names = ", ".join(f"{name} ({tier})" for name, tier in above)
    return (f"uses {names}: move it to tests/{needed}/ (split its file by tier if the other "
            f"tests of the file need less)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with the tier of its folder; refuse a test that needs a higher tier."""
    problems = []
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # a test outside tests/ (pytest given another path)
            continue
        problem = tier_problem(folder=folder, fixtures=list(getattr(item, "fixturenames", ())))
        if problem:
            problems.append(f"{item.nodeid} {problem}")
        else:
            item.add_marker(getattr(pytest.mark, folder))
    if problems:
        raise pytest.UsageError("tests outside their tier:\n  " + "\n  ".join(problems))


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the tests and the processes they start as it would from a terminal: a
    shell starts a background job (`scripts/test &`, a CI runner's script) with SIGINT ignored,
    every child inherits that, and a CLI or worker started with SIGINT ignored never sees the
    Ctrl-C a test sends it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
