"""The one redactor of Redis URLs: what the operator, the CLI and their logs may print.

Pure, no I/O, never raises. A Redis URL may carry a password in its userinfo
(`redis://user:pass@host`, the password possibly holding unencoded `@`, `/`, `:` or `?`, as
base64 passwords do) or in its query (`?password=...`, `?sentinel_password=...`). Multi-host
DSNs (`redis+cluster://u:pw@a:7000,b:7001`, `redis+sentinel://s1,s2/mymaster/0`,
`taskqueue.redisio.dsn`) are handled the same way. `url()` hides both; `scrub()` hides every
URL inside a free text (an exception message); `check()`/`problem()`, the one URL check of the
project (the DSN parser runs it first), say whether a URL is usable without ever quoting it, so a
parse error names the field, never a fragment of the value (with `tls_problem()`, which checks
the `ssl_*` options); `has_password()` is the rule the CRD enforces
at admission (`PASSWORD_IN_USERINFO` and `PASSWORD_IN_QUERY` are RE2-compatible, shared with the
CEL rule in `taskqueue.api.crdgen`).

Where it is unsure it hides more, never less: the userinfo is everything between `://` and the
last `@` (a password may contain `@`), so an `@` in a query value hides the part before it too.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"

PASSWORD_IN_USERINFO = "^[A-Za-z][A-Za-z0-9+.-]*://[^@]*:[^@]+@"
"""A userinfo with a non-empty password (`user:pw@`, `:pw@`); RE2 and Python syntax."""
PASSWORD_IN_QUERY = "[?&](?i:[a-z_]*password|pass|passwd|pwd)=[^&#]"
"""A non-empty password query parameter (`?password=pw`, `?sentinel_password=pw`); RE2 and
Python syntax."""

SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel",
           "rediss+sentinel")
"""The schemes of a Redis DSN (one server, a Redis Cluster, Sentinel; see taskqueue.redisio.dsn)."""

_SECRET_PARAMS = re.compile(
    r"([?&;](?:[a-z_]*password|pass|passwd|pwd|secret|token|auth|access_token)=)[^&#;]*",
    re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_USERINFO = re.compile(PASSWORD_IN_USERINFO)
_QUERY = re.compile(PASSWORD_IN_QUERY)
TLS_OPTIONS = frozenset({"ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile",
                         "ssl_password", "ssl_cert_reqs", "ssl_check_hostname", "ssl_ciphers"})
"""The `ssl_*` options of a Redis URL: those the worker's own connection and redis-py (the CLI,
the operator) both take."""
CERT_REQS = ("none", "optional", "required")
"""The values of `ssl_cert_reqs`."""
URL_OPTIONS = frozenset({"db", "socket_timeout", "socket_connect_timeout", "max_connections",
                         "health_check_interval", "username", "password", "sentinel_username",
                         "sentinel_password"})
"""The other options of a Redis URL: those the worker's own connection and redis-py (the CLI, the
operator) both take, and two that only size and check redis-py's pool (max_connections,
health_check_interval; the worker keeps one connection per thread). redis-py would pass any other
name to its connection class, which fails with a TypeError when the first command is sent."""
_OPTION_NAME = re.compile(r"[A-Za-z0-9_]{1,40}")
_INT_PARAMS = ("db", "max_connections", "health_check_interval")
_FLOAT_PARAMS = ("socket_timeout", "socket_connect_timeout")


def url(text: str) -> str:
    """`text` (a URL) with any password hidden: `redis://user:***@host:6379/0?password=***`.

    A userinfo without a colon (`redis://secret@host`) is hidden whole: Redis < 6 has no users,
    so it is often a password written in the user's place.
    """
    text = _SECRET_PARAMS.sub(lambda m: m.group(1) + MASK, text)
    scheme, sep, rest = text.partition("://")
    if not sep:  # no scheme: `user:pw@host:6379` is still a userinfo
        scheme, rest = "", text
    at = rest.rfind("@")
    if at < 0:
        return text
    user, colon, _ = rest[:at].partition(":")
    shown = f"{user}:{MASK}" if colon else MASK
    return f"{scheme}{sep}{shown}@{rest[at + 1:]}"


def scrub(text: str) -> str:
    """`text` with every URL in it redacted (for exception messages and log lines)."""
    return _URL_IN_TEXT.sub(lambda m: url(m.group(0)), _SECRET_PARAMS.sub(
        lambda m: m.group(1) + MASK, text))


def has_password(text: str) -> bool:
    """True when the URL carries a password, in its userinfo or its query."""
    return bool(_USERINFO.search(text) or _QUERY.search(text))


def check(text: str, *, field: str) -> str | None:
    """None when `text` is a usable Redis URL, else a one-line error naming `field`, the part
    that is wrong and the fix (see `problem`)."""
    found = problem(text)
    return None if found is None else f"{field}: {found}"


def problem(text: str) -> str | None:
    """What is wrong with a Redis URL, naming the part and the fix; None when it is usable.

    The one URL check of the operator, the worker and the CLI, and the first step of the DSN
    parser (`taskqueue.redisio.dsn.RedisSettings.from_dsn`): a URL it accepts parses. It never
    quotes the value nor the parser's message (which can hold a fragment of a password: `Port
    could not be cast to integer value as '<password prefix>'`).
    """
    if not text.startswith(tuple(f"{s}://" for s in SCHEMES)):
        return ("scheme must be redis://[user:password@]host:6379/0, rediss:// (TLS), "
                "unix:///path/to/socket, redis+cluster://host:7000 or "
                "redis+sentinel://host:26379/mymaster")
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return ("the URL cannot be parsed (check the host, e.g. [::1] for IPv6, and "
                "percent-encode any '/', '@', ':', '?' or '#' in the user name or password)")
    if parts.scheme == "unix":
        return None if parts.path else "unix:// needs a socket path, e.g. unix:///run/redis.sock"
    query = urllib.parse.parse_qsl(parts.query)
    return (_hosts_problem(parts) or _query_problem(parts.query) or option_problem(query)
            or tls_problem(query, tls=parts.scheme.startswith("rediss"))
            or ("host is missing; use redis://host:6379/0" if not parts.hostname else None)
            or _path_problem(parts))


def _hosts_problem(parts: urllib.parse.SplitResult) -> str | None:
    """A host list that is not one host (several for Cluster seeds and sentinels), each with
    a port from 0 to 65535 or none."""
    if "+" not in parts.scheme and "," in parts.netloc.rpartition("@")[2]:
        return ("several hosts: use redis+cluster://h1:7000,h2:7001 (Cluster seed nodes) or "
                "redis+sentinel://s1:26379,s2:26379/mymaster (sentinels)")
    try:
        _check_ports(parts)
    except ValueError:
        return ("port is not a number from 0 to 65535 (percent-encode any '/', '@', ':', '?' "
                "or '#' in the user name or password, e.g. '/' as %2F)")
    return None


def _query_problem(query: str) -> str | None:
    try:
        _check_query(query)
    except ValueError:
        return ("a query parameter that takes a number has another value (db, "
                "max_connections, health_check_interval, socket timeouts)")
    return None


def _path_problem(parts: urllib.parse.SplitResult) -> str | None:
    """The path: `/<db>` for one server, `/<master name>[/<db>]` for Sentinel, nothing or `/0`
    for a Redis Cluster (it has only database 0)."""
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme.endswith("+sentinel"):
        if not segments:
            return "name the master, e.g. redis+sentinel://s1:26379/mymaster/0"
        segments = segments[1:]
    database = segments[0] if segments else dict(urllib.parse.parse_qsl(parts.query)).get("db", "0")
    if not database.isdigit():
        return "database (the path after the port) is not a number; use /0"
    if parts.scheme.endswith("+cluster") and int(database) != 0:
        return "Redis Cluster has only database 0; drop the /N from the URL"
    return None


def option_problem(query: list[tuple[str, str]]) -> str | None:
    """The first query option of a URL that is neither in URL_OPTIONS nor an `ssl_*` option
    (`tls_problem` judges those), named when it looks like an option name (never a value, nor
    a name that could be a fragment of one); None when there is none."""
    unknown = sorted({k for k, _ in query} - URL_OPTIONS - {k for k, _ in query
                                                          if k.startswith("ssl_")})
    if not unknown:
        return None
    name = unknown[0] if _OPTION_NAME.fullmatch(unknown[0]) else "(a query parameter)"
    return (f"Redis URL option {name} is not supported; use {', '.join(sorted(URL_OPTIONS))}, "
            "or an ssl_* option with rediss://")


def tls_problem(query: list[tuple[str, str]], *, tls: bool) -> str | None:
    """What is wrong with the `ssl_*` options of a URL's query (`tls`: its scheme is rediss),
    naming the option; None when they are usable. Never quotes a value."""
    given = {k: v for k, v in query if k.startswith("ssl_")}
    unknown = sorted(set(given) - TLS_OPTIONS)
    if unknown:
        return (f"Redis URL option {unknown[0]} is not supported; use "
                f"{', '.join(sorted(TLS_OPTIONS))}")
    if given and not tls:
        return (f"Redis URL option {min(given)} needs TLS: use rediss:// (rediss+cluster://, "
                "rediss+sentinel://)")
    if given.get("ssl_cert_reqs", "required").lower() not in CERT_REQS:
        return f"Redis URL option ssl_cert_reqs must be one of {', '.join(CERT_REQS)}"
    return None


def _check_ports(parts: urllib.parse.SplitResult) -> None:
    """Raise ValueError on a port that is not a number (each host of a multi-host DSN)."""
    if "+" not in parts.scheme:
        _ = parts.port
        return
    for host in parts.netloc.rpartition("@")[2].split(","):
        port = host.rpartition("]")[2].rpartition(":")[2] if ":" in host else ""
        if port and not (port.isdigit() and int(port) < 65536):
            raise ValueError("port")


def _check_query(query: str) -> None:
    for name, values in urllib.parse.parse_qs(query).items():
        value = urllib.parse.unquote(values[0]) if values else ""
        if name in _INT_PARAMS:
            int(value)
        elif name in _FLOAT_PARAMS:
            float(value)
