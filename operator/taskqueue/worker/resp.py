"""The worker's Redis connection: RESP over one socket, replies parsed by hiredis, no redis-py.

Each worker thread owns one `Connection` (a `store.Store`, the wake-up listener). Callers send
whole packed commands (`pack`, `bulk`); replies come from hiredis's C parser, strings decoded as
UTF-8 with `surrogateescape`, so payloads that are not UTF-8 travel back unchanged. The
connection reaches what a `dsn.RedisSettings` names: one server over TCP (TLS with the URL's
`ssl_*` files) or a unix socket; for Cluster and Sentinel, the master that serves the TaskQueue's
key, looked up again at every (re)connect through redis-py (`taskqueue.redisio.clients`, imported by
those topologies only), which is how a worker follows a failover. redis-py costs a worker more
start-up time than everything else it imports together; the worker needs none of its client.

Errors (`taskqueue.worker.resperrors`, re-exported here): an error reply raises `ReplyError` or
the subclass its code names; a lost, refused or not-yet-serving connection `ConnectionLostError`,
a late reply `TimeoutError`. Both are OSErrors; after either the connection is unusable.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import hiredis

from taskqueue.api import redact
from taskqueue.redisio import dsn
from taskqueue.worker.resperrors import (
    ClusterDownError,
    ConnectionLostError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    ProtocolError,
    ReadOnlyError,
    RedisError,
    ReplyError,
    TryAgainError,
    UnexpectedReplyError,
    reply_error,
)

if TYPE_CHECKING:
    import ssl

__all__ = [
    "ClusterDownError", "Connection", "ConnectionLostError", "MovedError", "NoPermissionError",
    "NoScriptError", "ProtocolError", "ReadOnlyError", "RedisError", "ReplyError", "TLSOptions",
    "Target", "TryAgainError", "UnexpectedReplyError", "bulk", "pack", "reply_error",
    "tls_context",
]


def bulk(value: str | bytes | int | float) -> bytes:
    """One RESP bulk string; `str` is encoded as UTF-8 with surrogateescape."""
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, bytes):
        data = value
    elif isinstance(value, int):
        data = b"%d" % value
    else:
        data = repr(float(value)).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def pack(args: Sequence[str | bytes | int | float]) -> bytes:
    """A RESP command."""
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


# -- where and how to connect ------------------------------------------------------------------
_TRUE = frozenset({"1", "true", "yes", "on", "y"})


@dataclass(frozen=True)
class TLSOptions:
    """The URL's `ssl_*` options, as redis-py reads them (the same defaults: a CA is required,
    the host name checked)."""

    ca_certs: str | None = None
    ca_path: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    password: str | None = None
    cert_reqs: str = "required"
    check_hostname: bool = True
    ciphers: str | None = None

    @classmethod
    def from_query(cls, query: Sequence[tuple[str, str]]) -> TLSOptions:
        """Raises dsn.SettingsError naming an `ssl_*` option that cannot be used
        (`redact.tls_problem`)."""
        problem = redact.tls_problem(list(query), tls=True)
        if problem is not None:
            raise dsn.SettingsError(problem)
        given = {k: v for k, v in query if k.startswith("ssl_")}
        reqs = given.get("ssl_cert_reqs", "required").lower()
        check = given.get("ssl_check_hostname", "true").lower() in _TRUE and reqs != "none"
        return cls(ca_certs=given.get("ssl_ca_certs"), ca_path=given.get("ssl_ca_path"),
                   certfile=given.get("ssl_certfile"), keyfile=given.get("ssl_keyfile"),
                   password=given.get("ssl_password"), cert_reqs=reqs, check_hostname=check,
                   ciphers=given.get("ssl_ciphers"))


@cache
def tls_context(options: TLSOptions) -> ssl.SSLContext:
    """The client TLS context of `options` (one per distinct options: contexts are reusable)."""
    import ssl  # only a TLS connection needs it

    context = ssl.create_default_context()
    context.check_hostname = options.check_hostname
    context.verify_mode = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[options.cert_reqs]
    if options.certfile:
        context.load_cert_chain(options.certfile, options.keyfile, options.password)
    if options.ca_certs or options.ca_path:
        context.load_verify_locations(options.ca_certs, options.ca_path)
    if options.ciphers:
        context.set_ciphers(options.ciphers)
    return context


@dataclass(frozen=True)
class Target:
    """What to connect to: settings from a worker's Redis URL, plus socket timeouts (the URL's
    socket_timeout / socket_connect_timeout win, as with redis-py)."""

    settings: dsn.RedisSettings
    tls: TLSOptions | None
    db: int
    connect_timeout: float
    timeout: float | None

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: float = 5.0,
                 timeout: float | None = 30.0) -> Target:
        """Raises dsn.SettingsError (a ValueError) naming what is wrong with `url`."""
        settings = dsn.RedisSettings.from_dsn(url)
        query = dict(settings.query)
        return cls(
            settings=settings,
            tls=TLSOptions.from_query(settings.query) if settings.tls else None,
            db=int(query.get("db", settings.db)),
            connect_timeout=float(query.get("socket_connect_timeout", connect_timeout)),
            timeout=(float(query["socket_timeout"]) if "socket_timeout" in query
                     else timeout),
        )

    def address(self, key: str) -> tuple[str, int] | None:
        """(host, port) of the master serving `key`, None for a unix socket."""
        s = self.settings
        if s.mode == "standalone":
            return None if s.scheme == "unix" else s.hosts[0]
        from taskqueue.redisio import clients  # redis-py: Cluster and Sentinel discovery only

        try:
            return clients.master_address(
                s, key, socket_timeout=self.connect_timeout,
                socket_connect_timeout=self.connect_timeout)
        except Exception as exc:  # redis-py's errors, or OSError: no master found (yet)
            raise ConnectionLostError(
                f"no master of {s.describe()} found for {key}: {exc}") from exc


_DEFAULT: Any = object()


def _reader() -> hiredis.Reader:
    """A fresh reply parser: strings decoded as UTF-8 with surrogateescape."""
    return hiredis.Reader(encoding="utf-8", errors="surrogateescape", replyError=ReplyError,
                          protocolError=ProtocolError)


class Connection:
    """One connection to the master serving `key`, opened on first use (`connect`)."""

    def __init__(self, target: Target, *, key: str, protocol: int = 2) -> None:
        self.target = target
        self.key = key
        self.protocol = protocol
        self.sock: socket.socket | None = None
        self._reader = _reader()

    def connect(self) -> None:
        """Open the socket and authenticate (HELLO / AUTH, SELECT), unless already open."""
        if self.sock is not None:
            return
        self.sock = self._open()
        try:
            self._handshake()
        except BaseException:
            self.close()
            raise

    def _open(self) -> socket.socket:
        t = self.target
        address = t.address(self.key)
        where = t.settings.unix_path if address is None else f"{address[0]}:{address[1]}"
        try:
            if address is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(t.connect_timeout)
                try:
                    sock.connect(t.settings.unix_path or "")
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection(address, timeout=t.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if t.tls is not None:
                    sock = tls_context(t.tls).wrap_socket(sock, server_hostname=address[0])
        except OSError as exc:
            raise ConnectionLostError(f"cannot connect to Redis at {where}: {exc}") from exc
        sock.settimeout(t.timeout)
        return sock

    def _handshake(self) -> None:
        s = self.target.settings
        if self.protocol == 3:
            hello: list[str | int] = ["HELLO", 3]
            if s.password:
                hello += ["AUTH", s.username or "default", s.password]
            self._call(hello)
        elif s.password:
            self._call(["AUTH", s.username, s.password] if s.username else ["AUTH", s.password])
        if self.target.db:
            self._call(["SELECT", self.target.db])

    def _call(self, args: Sequence[str | int]) -> Any:
        self.send(pack(args))
        return self.read()

    def send(self, packed: bytes) -> None:
        """Send one or more packed commands (connecting first if needed)."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        try:
            self.sock.sendall(packed)
        except OSError as exc:
            raise ConnectionLostError(f"lost Redis while sending: {exc}") from exc

    def read(self, *, timeout: float | None = _DEFAULT) -> Any:
        """The next reply (or RESP3 push); `timeout` seconds instead of the socket timeout.
        An error reply is raised (`reply_error`)."""
        reply = self._reader.gets()
        if reply is False:
            reply = self._receive(timeout)
        if isinstance(reply, ReplyError):
            raise reply_error(str(reply))
        return reply

    def _receive(self, timeout: float | None) -> Any:
        sock = self.sock
        if sock is None:
            raise ConnectionLostError("the Redis connection is closed")
        if timeout is not _DEFAULT:
            sock.settimeout(timeout)
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionLostError("Redis closed the connection")
                self._reader.feed(data)
                reply = self._reader.gets()
                if reply is not False:
                    return reply
        except TimeoutError:
            raise TimeoutError(f"no reply from Redis within {sock.gettimeout()} s") from None
        except ConnectionLostError:  # ProtocolError too
            raise
        except OSError as exc:
            raise ConnectionLostError(f"lost Redis while reading: {exc}") from exc
        finally:
            if timeout is not _DEFAULT and self.sock is not None:
                self.sock.settimeout(self.target.timeout)

    def buffered(self) -> bool:
        """Whether a reply may be readable without waiting on the socket (already received, or
        decrypted and pending in a TLS socket), which select/poll cannot see."""
        pending = getattr(self.sock, "pending", None)
        return bool(self._reader.has_data() or (pending is not None and pending()))

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._reader = _reader()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
