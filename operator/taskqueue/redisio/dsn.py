"""Where Redis is: DSNs of one server, a Redis Cluster or Sentinel, and their translation from
spec.redis. Pure (no redis import); `taskqueue.redisio.clients` builds the clients.

A `RedisSettings` is parsed from a DSN in the style of arq's `RedisSettings.from_dsn`:

| DSN                                                      | topology                          |
|----------------------------------------------------------|-----------------------------------|
| `redis://[user:pass@]host:6379/0`, `rediss://…`, `unix://`| one server (rediss: TLS)          |
| `redis+cluster://[user:pass@]h1:7000,h2:7001`            | Redis Cluster (seed nodes)        |
| `redis+sentinel://[user:pass@]s1:26379,s2:26379/mymaster/0` | Sentinel: master `mymaster`, db 0 |

`rediss+cluster://` and `rediss+sentinel://` use TLS to the data nodes (and to the sentinels).
Query parameters are redis-py's (`ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile`, `ssl_cert_reqs`,
`socket_timeout`, …); `sentinel_password` / `sentinel_username` authenticate to the sentinels.
A DSN is checked by `taskqueue.api.redact.problem`, the one URL check of the project, before
it is parsed. `dsn_for`, `with_tls_dir` and `with_sentinel_password` turn spec.redis into a DSN.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Literal, Protocol

from taskqueue.api import redact

Mode = Literal["standalone", "cluster", "sentinel"]


class Sentinel(Protocol):
    """What `dsn_for` reads of spec.redis.sentinel (models.SentinelSpec)."""

    @property
    def masterName(self) -> str: ...  # noqa: N802 (the manifest's field name)

    @property
    def addresses(self) -> list[str]: ...

_SCHEMES: dict[str, tuple[Mode, str]] = {
    "redis": ("standalone", "redis"),
    "rediss": ("standalone", "rediss"),
    "unix": ("standalone", "unix"),
    "redis+cluster": ("cluster", "redis"),
    "rediss+cluster": ("cluster", "rediss"),
    "redis+sentinel": ("sentinel", "redis"),
    "rediss+sentinel": ("sentinel", "rediss"),
}
_SENTINEL_QUERY = ("sentinel_password", "sentinel_username")
_CREDENTIALS_QUERY = ("username", "password")
"""Credentials a URL may give in its query (`?password=...`) instead of its userinfo, which wins
when it has them (as in redis-py); they become the settings' own, so every client uses them."""


def _credentials(query: list[tuple[str, str]], *, username: str | None, password: str | None
                 ) -> tuple[str | None, str | None, tuple[tuple[str, str], ...]]:
    """The username and password (the userinfo's, else the query's) and the query without them."""
    given = dict(query)
    return (username or given.get("username") or None, password or given.get("password") or None,
            tuple((k, v) for k, v in query if k not in _CREDENTIALS_QUERY))


class SettingsError(ValueError):
    """A DSN or setting that cannot name a Redis; the message names the fix."""


@dataclass(frozen=True)
class RedisSettings:
    """Where Redis is and how to authenticate; build clients with the functions below."""

    mode: Mode
    scheme: str
    """`redis`, `rediss` (TLS) or `unix` for the data nodes."""
    hosts: tuple[tuple[str, int], ...]
    """The server (standalone), seed nodes (cluster) or sentinels (sentinel)."""
    master_name: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    query: tuple[tuple[str, str], ...] = ()
    """redis-py URL options (ssl_ca_certs, socket_timeout, …) passed on to every node URL."""
    unix_path: str | None = None

    @classmethod
    def from_dsn(cls, dsn: str) -> RedisSettings:
        """Parse `dsn`; SettingsError naming what is wrong and the fix (`redact.problem`, the
        one URL check of the project: every DSN it accepts parses)."""
        problem = redact.problem(dsn)
        if problem is not None:
            raise SettingsError(problem)
        mode, data_scheme = _SCHEMES[dsn.split("://", 1)[0]]
        if data_scheme == "unix":
            parts = urllib.parse.urlsplit(dsn)
            username, password, query = _credentials(
                urllib.parse.parse_qsl(parts.query), username=_unquote(parts.username),
                password=_unquote(parts.password))
            return cls(mode="standalone", scheme="unix", hosts=(), unix_path=parts.path,
                       username=username, password=password, query=query)
        return _parse_network(dsn, mode, data_scheme)

    @property
    def tls(self) -> bool:
        return self.scheme == "rediss"

    def node_url(self, host: str | None = None, port: int | None = None) -> str:
        """A plain redis:// (rediss://, unix://) URL of one data node with these credentials."""
        auth = ""
        if self.username or self.password:
            auth = (urllib.parse.quote(self.username or "", safe="") + ":"
                    + urllib.parse.quote(self.password or "", safe="") + "@")
        query = urllib.parse.urlencode(list(self.query))
        if self.scheme == "unix":
            return f"unix://{auth}{self.unix_path}" + (f"?{query}" if query else "")
        if host is None or port is None:
            host, port = self.hosts[0]
        url = f"{self.scheme}://{auth}{_host(host)}:{port}/{self.db}"
        return url + (f"?{query}" if query else "")

    def describe(self) -> str:
        """Where this points, password-free (for logs, events and errors)."""
        hosts = ",".join(f"{h}:{p}" for h, p in self.hosts) or (self.unix_path or "")
        suffix = f"/{self.master_name}" if self.master_name else ""
        return f"{self.scheme}{'' if self.mode == 'standalone' else '+' + self.mode}://{hosts}{suffix}"


def _parse_network(dsn: str, mode: Mode, data_scheme: str) -> RedisSettings:
    rest = dsn.split("://", 1)[1]
    # the query starts at the first '?' (the authority and path cannot hold one unencoded), and
    # its values may hold '/' (ssl_ca_certs=/path): split it off before looking for the path
    before_query, _, query_text = rest.partition("?")
    netloc, _, path = before_query.partition("/")
    userinfo, _, hostlist = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    query = urllib.parse.parse_qsl(query_text)
    extra = {k: v for k, v in query if k in _SENTINEL_QUERY}
    query = [(k, v) for k, v in query if k not in _SENTINEL_QUERY and k != "db"]
    hosts = tuple(_host_port(h, 26379 if mode == "sentinel" else 6379)
                  for h in hostlist.split(",") if h)
    segments = [s for s in path.split("/") if s]
    master = segments.pop(0) if mode == "sentinel" else None
    db = int(segments[0]) if segments else int(dict(urllib.parse.parse_qsl(query_text))
                                               .get("db", 0))
    user, secret, options = _credentials(query, username=_unquote(username),
                                         password=_unquote(password))
    return RedisSettings(
        mode=mode, scheme=data_scheme, hosts=hosts, master_name=master, db=db,
        username=user, password=secret,
        sentinel_username=extra.get("sentinel_username"),
        sentinel_password=extra.get("sentinel_password"), query=options,
    )


def _host_port(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = text.partition(":")
    try:
        return host, int(port) if port else default_port
    except ValueError:
        raise SettingsError(f"port {port!r} of host {host!r} is not a number") from None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _unquote(text: str | None) -> str | None:
    return urllib.parse.unquote(text) if text else None


def dsn_for(url: str, mode: str, *, sentinel: Sentinel | None = None) -> str:
    """`url` as a DSN of the topology spec.redis names: mode cluster turns redis:// into
    redis+cluster://; a `sentinel` (masterName, addresses) turns it into redis+sentinel://
    with the URL's credentials, TLS, database and options."""
    if sentinel is not None and url.startswith(("redis://", "rediss://")):
        parts = urllib.parse.urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        db = parts.path.strip("/") or "0"
        auth = f"{userinfo}@" if userinfo else ""
        return (f"{parts.scheme}+sentinel://{auth}{','.join(sentinel.addresses)}/"
                f"{sentinel.masterName}/{db}" + (f"?{parts.query}" if parts.query else ""))
    if mode == "cluster" and url.startswith(("redis://", "rediss://")):
        scheme, rest = url.split("://", 1)
        return f"{scheme}+cluster://{rest}"
    return url


class TLS(Protocol):
    """What `with_tls_dir` reads of spec.redis.tls (models.RedisTLSSpec)."""

    @property
    def caKey(self) -> str: ...  # noqa: N802

    @property
    def certKey(self) -> str | None: ...  # noqa: N802

    @property
    def keyKey(self) -> str | None: ...  # noqa: N802


def with_tls_dir(url: str, tls: TLS | None, directory: str) -> str:
    """`url` with the CA (and client certificate) of spec.redis.tls read from `directory`,
    where the Secret's keys are files (a mounted Secret volume)."""
    if tls is None:
        return url
    files = [("ssl_ca_certs", tls.caKey)]
    if tls.certKey and tls.keyKey:
        files += [("ssl_certfile", tls.certKey), ("ssl_keyfile", tls.keyKey)]
    query = urllib.parse.urlencode([(k, f"{directory.rstrip('/')}/{v}") for k, v in files])
    return url + ("&" if "?" in url else "?") + query


def with_sentinel_password(url: str, password: str | None) -> str:
    """`url` with the sentinels' own password (spec.redis.sentinel.passwordSecretRef)."""
    if not password:
        return url
    query = urllib.parse.urlencode([("sentinel_password", password)])
    return url + ("&" if "?" in url else "?") + query


def is_cluster_dsn(url: str) -> bool:
    return url.startswith(("redis+cluster://", "rediss+cluster://"))
