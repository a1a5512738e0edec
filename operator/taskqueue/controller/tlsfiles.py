"""The operator's copy of spec.redis.tls: the Secret's CA and client certificate as files.

redis-py reads TLS material from files, and the worker pods get them as a mounted Secret; the
operator reads the same Secret keys through the API and writes them into a private folder of
its own (0700, files 0600), rewritten when the Secret's contents change.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from taskqueue.api import models
from taskqueue.controller.kube import Kube, NotFoundError

_ROOT: list[Path] = []


def _root() -> Path:
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="taskqueue-tls-")))
    return _ROOT[0]


def _keys(tls: models.RedisTLSSpec) -> list[str]:
    return [k for k in (tls.caKey, tls.certKey, tls.keyKey) if k]


def write(namespace: str, tls: models.RedisTLSSpec, values: dict[str, str]) -> Path:
    """Write `values` (Secret key -> PEM text) into the folder of this Secret; returns it."""
    digest = hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()[:16]
    folder = _root() / f"{namespace}.{tls.secretName}.{digest}"
    if not folder.exists():
        staging = Path(tempfile.mkdtemp(dir=_root()))
        for key, value in values.items():
            path = staging / key
            path.write_text(value)
            path.chmod(0o600)
        os.replace(staging, folder)
    return folder


async def materialize(kube: Kube, namespace: str, tls: models.RedisTLSSpec) -> Path:
    """The folder holding the Secret's TLS keys as files (read through `kube`)."""
    values: dict[str, str] = {}
    for key in _keys(tls):
        try:
            values[key] = await kube.secret_value(namespace, tls.secretName, key)
        except NotFoundError:
            raise NotFoundError(
                f"spec.redis.tls: Secret {tls.secretName!r} with key {key!r} not found in "
                f"namespace {namespace}; create it with the PEM as the value") from None
    return write(namespace, tls, values)
