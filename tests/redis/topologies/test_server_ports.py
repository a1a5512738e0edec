"""The test servers' ports: `free_port` hands out a port the kernel may give an outgoing
connection (or another test process's server) before redis-server binds it. A server's first
start then moves to another free port; a restart keeps the port it had and says why it failed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.fixtures.redis_server import RedisServer, free_port


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port a socket of this process listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_first_start_on_a_taken_port_moves_to_a_free_one(tmp_path: Path,
                                                           taken_port: int) -> None:
    server = RedisServer(data_dir=tmp_path / "redis", port=taken_port)
    server.start()
    try:
        assert server.port != taken_port
        assert redis.Redis(port=server.port).ping()
    finally:
        server.stop()


def test_a_restart_keeps_its_port_and_fails_when_that_port_is_taken(tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path / "redis", port=free_port())
    server.start()
    port = server.port
    server.stop(kill=True)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the old TIME_WAITs
        s.bind(("127.0.0.1", port))
        s.listen()
        with pytest.raises(RuntimeError,
                           match=f"(?s)port {port}: it exited .*Address already in use"):
            server.start()
    server.start()
    try:
        assert server.port == port
        assert redis.Redis(port=port).ping()
    finally:
        server.stop()
