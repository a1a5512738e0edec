"""The one redactor (`taskqueue.api.redact`): table-driven, pure."""

from __future__ import annotations

import re

import pytest

from taskqueue.api import crdgen, redact
from taskqueue.redisio import dsn

# a base64 password: '/' and '+' and '=' unencoded, as `openssl rand -base64` prints them

B64 = "Zm9v/YmFy+cXV4=="


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("redis://host:6379/0", "redis://host:6379/0", id="no-password"),
        pytest.param("redis://:pw@host:6379/0", "redis://:***@host:6379/0", id="password"),
        pytest.param("rediss://user:pw@host/1", "rediss://user:***@host/1", id="user-password"),
        pytest.param("rediss://user:pw@host:6380/1", "rediss://user:***@host:6380/1",
                     id="user-password-port"),
        pytest.param("redis://:pw@host/0", "redis://:***@host/0", id="password-no-port"),
        pytest.param("rediss://:pw@host:6380/1", "rediss://:***@host:6380/1", id="tls-password"),
        pytest.param("redis://user:p@ss@host/0", "redis://user:***@host/0", id="at-in-password"),
        pytest.param(f"redis://:{B64}@host:6379/0", "redis://:***@host:6379/0",
                     id="slash-in-password"),
        pytest.param("redis://u:a/b@c:d@host/0", "redis://u:***@host/0", id="slash-at-colon"),
        pytest.param("redis://secret@host/0", "redis://***@host/0", id="userinfo-no-colon"),
        pytest.param("redis://user@host:6379", "redis://***@host:6379",
                     id="userinfo-no-colon-port"),
        pytest.param("redis://host/0?password=pw&db=1", "redis://host/0?password=***&db=1",
                     id="query-password"),
        pytest.param("redis://host/0?db=1&Password=p@w", "redis://host/0?db=1&Password=***",
                     id="query-password-with-at"),
        pytest.param("unix:///tmp/redis.sock?password=x", "unix:///tmp/redis.sock?password=***",
                     id="unix-query"),
        pytest.param("redis+cluster://u:secret@a:1,b:2", "redis+cluster://u:***@a:1,b:2",
                     id="several-hosts"),
        pytest.param("redis+sentinel://s1,s2/m/0?sentinel_password=sp&socket_timeout=1",
                     "redis+sentinel://s1,s2/m/0?sentinel_password=***&socket_timeout=1",
                     id="sentinel-password-option"),
        pytest.param("rediss://h?password=pw", "rediss://h?password=***", id="password-option"),
        pytest.param("redis://:p%40ss@h/0", "redis://:***@h/0", id="percent-encoded"),
        pytest.param("not a url", "not a url", id="not-a-url"),
        pytest.param("user:pw@host:6379", "user:***@host:6379", id="no-scheme"),
        pytest.param("host:6379", "host:6379", id="no-scheme-no-userinfo"),
    ],
)
def test_url_hides_the_password(url: str, shown: str) -> None:
    assert redact.url(url) == shown


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        pytest.param(f"Error connecting to redis://:{B64}@h:1/0: refused", B64, id="url"),
        pytest.param("Error 111 at rediss://u:p@ss@h/0.", "p@ss", id="at"),
        pytest.param("bad url 'redis://h/0?password=hunter2'", "hunter2", id="query"),
    ],
)
def test_scrub_hides_urls_inside_text(text: str, secret: str) -> None:
    out = redact.scrub(text)
    assert secret not in out
    assert "***" in out


@pytest.mark.parametrize(
    ("url", "has"),
    [
        pytest.param("redis://h:6379/0", False, id="none"),
        pytest.param("redis://user@h/0", False, id="user-only"),
        pytest.param("redis://:@h/0", False, id="empty-password"),
        pytest.param("redis://:pw@h/0", True, id="password"),
        pytest.param(f"redis://:{B64}@h:6379/0", True, id="base64"),
        pytest.param("redis://u:p@ss@h/0", True, id="at"),
        pytest.param("redis://h/0?password=x", True, id="query"),
        pytest.param("redis://h/0?db=0&PASSWORD=x", True, id="query-upper"),
        pytest.param("redis://h/0?password=", False, id="query-empty"),
        pytest.param("redis+sentinel://s1/m?sentinel_password=x", True, id="sentinel-option"),
    ],
)
def test_has_password(url: str, has: bool) -> None:
    assert redact.has_password(url) is has


def test_the_crd_rule_uses_the_same_expressions() -> None:
    rules = [r["rule"] for r in crdgen.openapi_schema()["properties"]["spec"]["properties"]
             ["redis"]["x-kubernetes-validations"]]
    assert any(redact.PASSWORD_IN_USERINFO in r and redact.PASSWORD_IN_QUERY in r for r in rules)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        pytest.param(f"redis://:{B64}@host:6379/0", "Zm9v", id="base64-slash"),
        pytest.param("redis://host:notaport/0", "notaport", id="port"),
        pytest.param("redis://host:99999/0", "99999", id="port-range"),
        pytest.param("redis://host/0?db=secretish", "secretish", id="db"),
        pytest.param("redis://host/0?socket_timeout=abc", "abc", id="timeout"),
        pytest.param("redis+cluster://a:7000,b:secretport", "secretport", id="cluster-port"),
    ],
)
def test_check_names_the_field_never_the_value(url: str, fragment: str) -> None:
    problem = redact.check(url, field="spec.redis.url")
    assert problem is not None
    assert problem.startswith("spec.redis.url: ")
    assert fragment not in problem
    assert "\n" not in problem


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        pytest.param("redis://host:6379/0", True, id="plain"),
        pytest.param("rediss://:p%2Fw@host:6380/0", True, id="encoded-password"),
        pytest.param("unix:///run/redis.sock?db=2", True, id="unix"),
        pytest.param("redis+cluster://a:7000,b:7001", True, id="cluster"),
        pytest.param("rediss+sentinel://s1:26379,[::1]:26380/m/0", True, id="sentinel"),
        pytest.param("redis+sentinel://s1/mymaster", True, id="sentinel-database-0"),
        pytest.param("redis+cluster://a:7000/0?db=0", True, id="cluster-database-0"),
        pytest.param("redis://h:6379?db=3", True, id="database-option"),
        pytest.param("rediss://h/0?ssl_ca_certs=/ca&ssl_cert_reqs=none", True, id="tls-options"),
        pytest.param("http://host", False, id="scheme"),
        pytest.param("redis://", False, id="no-host"),
    ],
)
def test_check_accepts_usable_urls(url: str, ok: bool) -> None:
    assert (redact.check(url, field="f") is None) is ok
    if ok:  # the DSN parser checks with `problem` first: what it accepts parses
        dsn.RedisSettings.from_dsn(url)


@pytest.mark.parametrize(
    ("url", "part"),
    [
        pytest.param("http://host", "scheme must be redis://", id="scheme"),
        pytest.param("redis://host:notaport/0", "port is not a number", id="port"),
        pytest.param("redis+cluster://a:7000,b:x", "port is not a number", id="cluster-port"),
        pytest.param("redis://host/0?socket_timeout=abc", "a query parameter", id="query"),
        pytest.param("redis:///0", "host is missing", id="no-host"),
        pytest.param("redis://host/db1", "database (the path after the port)", id="database"),
        pytest.param("unix://", "unix:// needs a socket path", id="unix-without-path"),
        pytest.param("redis://[::1/0", "the URL cannot be parsed", id="broken-ipv6"),
        pytest.param("redis://:pa/ss@host:6379", "port is not a number", id="slash-password"),
        pytest.param("redis://host:70000", "port is not a number", id="port-range"),
        pytest.param("redis://a:6379,b:6379/0", "several hosts: use redis+cluster://",
                     id="several-hosts-of-one-server"),
        pytest.param("redis+sentinel://s1:26379,s2", "name the master", id="sentinel-no-master"),
        pytest.param("redis+sentinel://s1/mymaster/zero", "database", id="sentinel-database"),
        pytest.param("redis+cluster://a:7000/1", "Redis Cluster has only database 0",
                     id="cluster-database"),
        pytest.param("redis+cluster://a:7000?db=2", "Redis Cluster has only database 0",
                     id="cluster-database-option"),
        pytest.param("rediss://h:6380/0?ssl_verify=1", "Redis URL option ssl_verify is not",
                     id="unknown-tls-option"),
        pytest.param("redis://h:6379/0?ssl_ca_certs=/ca", "Redis URL option ssl_ca_certs needs "
                     "TLS", id="tls-option-without-tls"),
    ],
)
def test_problem_names_the_part_that_is_wrong(url: str, part: str) -> None:
    found = redact.problem(url)
    assert found is not None and found.startswith(part)
    assert redact.check(url, field="--redis-url") == f"--redis-url: {found}"


def test_the_expressions_are_re2_safe() -> None:
    # no lookaround or backreferences: the API server's CEL uses RE2
    for expr in (redact.PASSWORD_IN_USERINFO, redact.PASSWORD_IN_QUERY):
        assert not re.search(r"\(\?[=!<]|\\[1-9]", expr)
