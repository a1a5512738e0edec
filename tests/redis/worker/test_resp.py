"""The worker's own Redis connection (`taskqueue.worker.resp`): replies, errors, auth, databases,
RESP3 pushes, timeouts and lost servers, against a real redis-server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import redis

from taskqueue.redisio import dsn
from taskqueue.worker import resp
from taskqueue.worker.resp import pack
from tests.fixtures.redis_server import RedisServer, free_port


@pytest.fixture
def conn(redis_url: str) -> Iterator[resp.Connection]:
    c = resp.Connection(resp.Target.from_url(redis_url), key="k")
    yield c
    c.close()


def call(c: resp.Connection, *args: str | int | bytes) -> object:
    c.send(pack(args))
    return c.read()


# -- pure ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("message", "kind"), [
    pytest.param("NOSCRIPT No matching script.", resp.NoScriptError, id="noscript"),
    pytest.param("NOPERM this user has no permissions to run the 'zadd' command",
                 resp.NoPermissionError, id="noperm"),
    pytest.param("READONLY You can't write against a read only replica.", resp.ReadOnlyError,
                 id="readonly"),
    pytest.param("MOVED 3999 127.0.0.1:6381", resp.MovedError, id="moved"),
    pytest.param("ASK 3999 127.0.0.1:6381", resp.MovedError, id="ask"),
    pytest.param("CLUSTERDOWN The cluster is down", resp.ClusterDownError, id="clusterdown"),
    pytest.param("TRYAGAIN Multiple keys request during rehashing", resp.TryAgainError,
                 id="tryagain"),
    pytest.param("LOADING Redis is loading the dataset in memory", resp.ConnectionLostError,
                 id="loading-is-not-served-yet"),
    pytest.param("WRONGPASS invalid username-password pair", resp.ConnectionLostError,
                 id="refused-password"),
    pytest.param("ERR max number of clients reached", resp.ConnectionLostError,
                 id="too-many-clients"),
    pytest.param("WRONGTYPE Operation against a key holding the wrong kind of value",
                 resp.ReplyError, id="wrongtype"),
    pytest.param("OOM command not allowed when used memory > 'maxmemory'.", resp.ReplyError,
                 id="oom"),
])
def test_an_error_reply_raises_the_class_its_code_names(message: str, kind: type) -> None:
    error = resp.reply_error(message)
    assert type(error) is kind
    assert str(error) == message  # the code stays in the message (logs, WRONGTYPE checks)


@pytest.mark.parametrize(("url", "problem"), [
    pytest.param("rediss://h:6380/0?ssl_verify=1", "ssl_verify is not supported",
                 id="unknown-tls-option"),
    pytest.param("rediss://h:6380/0?ssl_cert_reqs=sometimes", "ssl_cert_reqs must be one of",
                 id="bad-cert-reqs"),
    pytest.param("http://h:6379", "scheme must be redis://", id="not-redis"),
])
def test_a_url_the_worker_cannot_use_is_refused_naming_the_option(url: str,
                                                                  problem: str) -> None:
    with pytest.raises(dsn.SettingsError, match=problem):
        resp.Target.from_url(url)


@pytest.mark.parametrize(("url", "db", "connect_timeout", "timeout", "tls"), [
    pytest.param("redis://h:6379/4", 4, 5.0, 30.0, None, id="path-db"),
    pytest.param("unix:///tmp/r.sock?db=2", 2, 5.0, 30.0, None, id="unix-query-db"),
    pytest.param("redis://h:6379/0?socket_timeout=2&socket_connect_timeout=1", 0, 1.0, 2.0,
                 None, id="timeouts-from-the-url"),
    pytest.param("rediss://h:6380/0?ssl_ca_certs=/ca.crt&ssl_cert_reqs=none", 0, 5.0, 30.0,
                 resp.TLSOptions(ca_certs="/ca.crt", cert_reqs="none", check_hostname=False),
                 id="tls-without-verification-checks-no-hostname"),
    pytest.param("rediss://h:6380/0?ssl_certfile=/c&ssl_keyfile=/k", 0, 5.0, 30.0,
                 resp.TLSOptions(certfile="/c", keyfile="/k"), id="tls-client-certificate"),
])
def test_a_url_gives_the_target(url: str, db: int, connect_timeout: float, timeout: float,
                                tls: resp.TLSOptions | None) -> None:
    target = resp.Target.from_url(url)
    assert (target.db, target.connect_timeout, target.timeout, target.tls) == (
        db, connect_timeout, timeout, tls)


# -- against redis-server ------------------------------------------------------------------------
def test_bytes_that_are_not_utf8_travel_back_unchanged(conn: resp.Connection,
                                                       redis_url: str) -> None:
    raw = b"\xff\xfe task \x00 \xc3\x28"
    redis.Redis.from_url(redis_url).rpush("q", raw)
    (text,) = call(conn, "LRANGE", "q", 0, -1)  # type: ignore[misc]
    assert call(conn, "LREM", "q", 0, text) == 1  # the ack matches byte for byte
    assert redis.Redis.from_url(redis_url).llen("q") == 0


def test_an_error_reply_leaves_the_connection_usable(conn: resp.Connection) -> None:
    call(conn, "SET", "s", "v")
    with pytest.raises(resp.ReplyError, match=r"^WRONGTYPE"):
        call(conn, "LPUSH", "s", "x")
    with pytest.raises(resp.NoScriptError):
        call(conn, "EVALSHA", "0" * 40, 0)
    assert call(conn, "GET", "s") == "v"


def test_the_database_and_the_password_of_the_url_apply(redis_factory: type[RedisServer]
                                                        ) -> None:
    server = redis_factory()  # type: ignore[call-arg]
    admin = redis.Redis(port=server.port, decode_responses=True)
    admin.acl_setuser("w", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"])
    for protocol in (2, 3):
        c = resp.Connection(resp.Target.from_url(f"redis://w:s3cret@127.0.0.1:{server.port}/5"),
                            key="k", protocol=protocol)
        try:
            call(c, "SET", f"in-db-5-resp{protocol}", "1")
            assert call(c, "ACL", "WHOAMI") == "w"
        finally:
            c.close()
    assert redis.Redis(port=server.port, db=5).exists("in-db-5-resp2", "in-db-5-resp3") == 2
    wrong = resp.Connection(resp.Target.from_url(f"redis://w:nope@127.0.0.1:{server.port}/0"),
                            key="k")
    with pytest.raises(resp.ConnectionLostError, match="WRONGPASS"):
        call(wrong, "PING")
    assert wrong.sock is None  # a failed handshake leaves nothing half-open


def test_a_resp3_connection_receives_invalidation_pushes(redis_url: str) -> None:
    c = resp.Connection(resp.Target.from_url(redis_url), key="k", protocol=3)
    try:
        assert call(c, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q") == "OK"
        redis.Redis.from_url(redis_url).lpush("q1", "x")
        push = c.read(timeout=5)
        assert list(push) == ["invalidate", ["q1"]]  # type: ignore[call-overload]
        assert not c.buffered()
    finally:
        c.close()


def test_a_reply_that_does_not_come_in_time_raises_timeout(conn: resp.Connection) -> None:
    conn.send(pack(["BLPOP", "nothing", 0]))
    with pytest.raises(TimeoutError):
        conn.read(timeout=0.2)


def test_a_server_that_goes_away_raises_connection_lost(redis_factory: type[RedisServer]
                                                        ) -> None:
    server = redis_factory()  # type: ignore[call-arg]
    c = resp.Connection(resp.Target.from_url(server.url), key="k")
    try:
        assert call(c, "PING") == "PONG"
        server.stop(kill=True)
        with pytest.raises(resp.ConnectionLostError):
            call(c, "PING")
    finally:
        c.close()
    refused = resp.Connection(resp.Target.from_url(f"redis://127.0.0.1:{free_port()}/0"),
                              key="k")
    with pytest.raises(resp.ConnectionLostError, match=r"cannot connect to Redis at 127\.0\.0\.1"):
        call(refused, "PING")


def test_garbage_from_the_server_is_a_protocol_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        peer, _ = listener.accept()
        peer.recv(1024)
        peer.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        peer.close()

    thread = threading.Thread(target=serve)
    thread.start()
    c = resp.Connection(resp.Target.from_url(f"redis://127.0.0.1:{port}/0"), key="k")
    try:
        with pytest.raises(resp.ConnectionLostError):
            call(c, "PING")
    finally:
        c.close()
        thread.join(5)
        listener.close()
