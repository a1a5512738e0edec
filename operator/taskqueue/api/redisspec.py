"""spec.redis of the TaskQueue API: where Redis is (one server, a Redis Cluster, Sentinel),
TLS from a Secret, durable mode. Pure pydantic models, re-exported by `taskqueue.api.models` (the
CRD is generated from them through `models.TaskQueue`); `taskqueue.redisio.dsn` turns them into a
DSN.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from taskqueue.api import redact
from taskqueue.api.statusschema import SpecModel

PASSWORD_IN_URL = (
    "spec.redis.url must not carry a password (anyone who can read the TaskQueue would see "
    "it); put the whole URL in a Secret and set spec.redis.urlSecretRef {name, key} instead"
)
RedisMode = Literal["standalone", "cluster"]

ADDRESS_PATTERN = r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:[0-9]{1,5})?$"
"""A sentinel address, host:port (RE2 and Python syntax: the CRD checks it too)."""
_ADDRESS_RE = re.compile(ADDRESS_PATTERN)


class SecretKeyRef(SpecModel):
    """A key in a Secret of the TaskQueue's namespace."""

    name: str = Field(min_length=1, description="Name of the Secret.")
    key: str = Field(min_length=1, description="Key inside the Secret whose value is the URL.")


class SentinelSpec(SpecModel):
    """Redis behind Sentinel: the sentinels name the master and follow its failovers."""

    masterName: str = Field(
        min_length=1, max_length=256, pattern=r"^[^\x00-\x20\x7f/]+$",
        description="Name the sentinels monitor the master under (sentinel monitor <name> ...).",
    )
    addresses: list[str] = Field(
        min_length=1, max_length=16,
        description="Sentinel addresses as host:port (port default 26379).",
    )
    passwordSecretRef: SecretKeyRef | None = Field(
        default=None,
        description="Secret key holding the sentinels' own password (requirepass of the "
        "sentinels); the master's credentials stay in the URL.",
    )

    @field_validator("addresses")
    @classmethod
    def _host_ports(cls, addresses: list[str]) -> list[str]:
        for a in addresses:
            if not _ADDRESS_RE.match(a):
                raise ValueError(
                    f"sentinel address {a!r} is not host:port; e.g. sentinel-0.sentinel:26379")
        return addresses


REDIS_TLS_DIR = "/etc/taskqueue/redis-tls"
"""Where worker pods mount spec.redis.tls.secretName (TASKQUEUE_REDIS_TLS_DIR overrides)."""


class RedisTLSSpec(SpecModel):
    """TLS material in a Secret of the TaskQueue's namespace, mounted into the workers (the
    server is always verified against the CA; there is no switch to turn that off)."""

    secretName: str = Field(min_length=1, description="Secret holding the CA (and client cert).")
    caKey: str = Field(default="ca.crt", min_length=1, description="Key of the CA certificate.")
    certKey: str | None = Field(
        default=None, description="Key of a client certificate (mutual TLS), with keyKey.")
    keyKey: str | None = Field(default=None, description="Key of the client certificate's key.")

    @model_validator(mode="after")
    def _pair(self) -> RedisTLSSpec:
        if (self.certKey is None) != (self.keyKey is None):
            raise ValueError("spec.redis.tls: set both certKey and keyKey (a client certificate "
                             "and its key, e.g. tls.crt and tls.key) or neither")
        return self


class RedisSpec(SpecModel):
    """How to reach Redis: a URL, or a Secret that holds it (passwords never in the spec)."""

    url: str | None = Field(
        default=None,
        description="redis:// or rediss:// (TLS) URL without a password; use urlSecretRef for one.",
    )
    urlSecretRef: SecretKeyRef | None = Field(
        default=None, description="Secret key holding the full Redis URL (may carry a password)."
    )
    mode: RedisMode = Field(
        default="standalone",
        description="cluster: the URL names seed nodes of a Redis Cluster (as a "
        "redis+cluster:// URL does); every key of the TaskQueue must share one {hash tag}.",
    )

    sentinel: SentinelSpec | None = Field(
        default=None,
        description="Find the master through these sentinels; the URL then gives only the "
        "credentials, TLS and database (its host is not used), e.g. redis://master/0 (with a "
        "password: urlSecretRef).",
    )

    waitForReplicas: int = Field(
        default=0, ge=0, le=5,
        description="Durable mode: after each fetch (the move into a processing list) the "
        "worker WAITs until this many replicas have it, so a failover cannot lose it; "
        "producers do the same with taskqueue.client's wait_replicas. Costs a round trip.",
    )
    tls: RedisTLSSpec | None = Field(
        default=None,
        description="CA and optional client certificate from a Secret, for a rediss:// URL.",
    )

    @model_validator(mode="after")
    def _one_topology(self) -> RedisSpec:
        if self.tls is not None and self.url is not None and not self.url.startswith("rediss"):
            raise ValueError(f"spec.redis.tls needs a TLS URL: use rediss:// instead of "
                             f"{self.url.split('://', 1)[0]}://")
        if self.sentinel is not None and self.mode == "cluster":
            raise ValueError("set spec.redis.mode cluster or spec.redis.sentinel, not both "
                             "(Redis Cluster fails over by itself)")
        return self

    @property
    def is_cluster(self) -> bool:
        """True for mode cluster or a redis+cluster:// / rediss+cluster:// URL."""
        return self.mode == "cluster" or (self.url or "").startswith(
            ("redis+cluster://", "rediss+cluster://"))

    @model_validator(mode="after")
    def _exactly_one(self) -> RedisSpec:
        if (self.url is None) == (self.urlSecretRef is None):
            raise ValueError(
                "set exactly one of url or urlSecretRef "
                "(e.g. url: redis://redis:6379/0)"
            )
        if self.url is not None:
            _check_redis_url(self.url)
        return self


def _check_redis_url(url: str) -> None:
    # never quotes the URL: a value that does not parse may hold a password
    if redact.has_password(url):
        raise ValueError(PASSWORD_IN_URL)
    problem = redact.check(url, field="url")
    if problem is not None:
        raise ValueError(problem)
