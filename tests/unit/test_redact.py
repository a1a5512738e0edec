"""`redact`: a Redis URL without its password, for logs, Events and status."""

from __future__ import annotations

import pytest

from taskqueue.observe import redact


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("redis://host:6379/0", "redis://host:6379/0", id="no-password"),
        pytest.param("redis://:pw@host:6379/0", "redis://:***@host:6379/0", id="password-only"),
        pytest.param("rediss://user:pw@host:6380/1", "rediss://user:***@host:6380/1",
                     id="user-and-password"),
        pytest.param("redis://:pw@host/0", "redis://:***@host/0", id="no-port"),
        pytest.param("redis://user@host:6379", "redis://user@host:6379", id="user-no-password"),
    ],
)
def test_redact(url: str, expected: str) -> None:
    assert redact(url) == expected
