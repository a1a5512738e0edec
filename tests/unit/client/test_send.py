"""What the producer client sends, decided once for its redis-py and redis.asyncio transports:
the command of each push, the calls of one round trip and the WAIT of durable mode, and what
the replies mean. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue import client
from taskqueue.wire import keys

NOW = 1_700_000_000.0


@pytest.mark.parametrize(("options", "command", "target"), [
    pytest.param({}, "LPUSH", "q", id="list"),
    pytest.param({"priority": 2}, "ZADD", "q", id="zset"),
    pytest.param({"delay": 60}, "enqueue.lua", "q:delayed", id="scheduled"),
    pytest.param({"unique_for": 60}, "enqueue.lua", "q", id="unique"),
])
def test_the_command_of_a_push(options: dict[str, Any], command: str, target: str) -> None:
    push = client.plan("q", b"p", now=NOW, **options)
    call = push.call
    if command == "enqueue.lua":
        assert isinstance(call, client.ScriptCall)
        assert call.keys == [target, push.unique_key]
        assert call.args[2] == push.data
    else:
        assert call[:2] == (command, target) and call[-1] == push.data


def test_a_zadd_carries_the_priority_as_its_score() -> None:
    assert client.plan("q", "p", priority=2.5, now=NOW).call[2] == 2.5


def test_a_send_of_many_pushes_keeps_their_order_and_the_key_of_the_first() -> None:
    pushes = [client.plan("{q}:a", str(i), now=NOW) for i in range(3)]
    send = client.Send.of(pushes, replicas=1, timeout_ms=500)
    assert send.calls == tuple(p.call for p in pushes) and send.key == "{q}:a"
    assert send.wait == ("WAIT", 1, 500)
    assert client.Send.of(pushes).wait is None


@pytest.mark.parametrize(("replicas", "raw", "replies"), [
    pytest.param(0, [1, 0], [1, 0], id="no-wait"),
    pytest.param(2, [1, 0, 2], [1, 0], id="confirmed"),
    pytest.param(1, [1, 3], [1], id="more-than-asked"),
])
def test_the_replies_of_the_calls(replicas: int, raw: list[Any], replies: list[Any]) -> None:
    send = client.Send(calls=(("LPUSH", "q", b"a"),) * (len(raw) - (replicas > 0)), key="q",
                       replicas=replicas)
    assert send.replies(raw) == replies


def test_fewer_replicas_than_asked_raise_not_replicated() -> None:
    send = client.Send(calls=(("LPUSH", "q", b"a"),), key="q", replicas=2, timeout_ms=100)
    with pytest.raises(client.NotReplicated,
                       match="1 of 2 replica\\(s\\) confirmed the push to q within 100 ms"):
        send.replies([1, 1])


def test_an_error_reply_of_the_wait_is_raised() -> None:
    send = client.Send(calls=(("LPUSH", "q", b"a"),), key="q", replicas=1)
    with pytest.raises(client.redis.ResponseError, match="NOPERM"):
        send.replies([1, client.redis.ResponseError("NOPERM wait")])


@pytest.mark.parametrize(("priority", "command"), [
    pytest.param(None, "LPUSH", id="list"), pytest.param(1, "ZADD", id="zset")])
def test_many_payloads_are_one_command_in_order(priority: float | None, command: str) -> None:
    ids, send = client._many("q", ["a", b"b"], priority=priority, wait_replicas=0,
                             wait_timeout_ms=client.WAIT_TIMEOUT_MS)
    assert send is not None and len(send.calls) == 1
    call = send.calls[0]
    assert isinstance(call, tuple) and call[:2] == (command, "q")
    elements = [e for e in call[2:] if isinstance(e, bytes)]
    assert [keys.unwrap(e.decode()).payload for e in elements] == ["a", "b"]
    assert [keys.unwrap(e.decode()).id for e in elements] == ids


def test_no_payload_sends_nothing() -> None:
    assert client._many("q", [], priority=None, wait_replicas=0, wait_timeout_ms=1) == ([], None)
