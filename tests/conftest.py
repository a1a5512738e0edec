"""Root pytest configuration: loads the shared fixture plugins (real Redis, real control plane)."""

pytest_plugins = [
    "tests.fixtures.redis_server", "tests.fixtures.redis_cluster", "tests.fixtures.redis_tls",
    "tests.fixtures.cluster",
    "tests.fixtures.operator",
]
