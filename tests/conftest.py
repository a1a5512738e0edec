"""Root pytest configuration: the shared fixture plugins (real Redis, control plane, images)."""

pytest_plugins = [
    "tests.fixtures.redis_server", "tests.fixtures.redis_cluster", "tests.fixtures.redis_tls",
    "tests.fixtures.cluster",
    "tests.fixtures.operator",
    "tests.fixtures.images",
    "tests.fixtures.registry",
    "tests.fixtures.worker",
    "tests.fixtures.cli",
]
