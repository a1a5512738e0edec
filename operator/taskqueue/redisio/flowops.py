"""The Redis side of flow control through redis-py: the operator writes the spec's limits and
pauses into the control hash (`sync`; in a poll the read rides the observe round trip,
`queueops.observe_polling`, and only a change is written, `write_changes`), `taskqueue
pause|resume` writes its own pause field (`pause`, `resume`), and both read the two flow hashes
back (`read`). What the fields mean is `taskqueue.wire.flow`'s (pure); the scripts enforce them
(lua/lib/flow.lua).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from taskqueue.wire import flow, keys

if TYPE_CHECKING:
    import redis.asyncio as aioredis


class FlowTypeError(redis.ResponseError):
    """A flow hash key holds another type (one line naming it)."""


def _hashes(types: Sequence[str], schema: keys.KeySchema) -> None:
    for key, kind in zip((schema.flow, schema.flow_state), types, strict=True):
        if kind not in ("hash", "none"):
            raise FlowTypeError(f"WRONGTYPE key {key} holds a {kind}, not a hash: delete it "
                                "(the operator writes it again from the TaskQueue)")


async def sync(client: aioredis.Redis, schema: keys.KeySchema,
               queues: Sequence[flow.QueueFlow]) -> tuple[flow.QueueFlow, ...]:
    """Make the operator's part of the control hash what `queues` declare (the CLI's pauses
    stay), and return every queue's flow control as it then stands."""
    async with client.pipeline(transaction=False) as pipe:
        read_pipe(pipe, schema)
        control, state = hashes(await pipe.execute(raise_on_error=False), schema)
    return await write_changes(client, schema, queues, control, state)


async def write_changes(client: aioredis.Redis, schema: keys.KeySchema,
                        queues: Sequence[flow.QueueFlow], control: dict[str, str],
                        state: dict[str, str]) -> tuple[flow.QueueFlow, ...]:
    """`sync` after its read (`control`, `state` as `hashes` gave them): nothing is sent while
    the operator's part of the control hash already is what `queues` declare."""
    to_set, to_delete = flow.sync_plan(flow.control_fields(queues), control)
    if to_set or to_delete:
        async with client.pipeline(transaction=True) as pipe:
            if to_set:
                mapping: dict[Any, Any] = dict(to_set)
                pipe.hset(schema.flow, mapping=mapping)
            if to_delete:
                pipe.hdel(schema.flow, *to_delete)
            await pipe.execute()
        control = {**{f: v for f, v in control.items() if f not in to_delete}, **to_set}
    return flow.read(schema.queue_keys, control, state)


def read(client: redis.Redis, schema: keys.KeySchema) -> tuple[flow.QueueFlow, ...]:
    """Every queue's flow control as the two hashes hold it now."""
    with client.pipeline(transaction=False) as pipe:
        read_pipe(pipe, schema)
        return read_reply(pipe.execute(raise_on_error=False), schema)


async def read_async(client: aioredis.Redis,
                     schema: keys.KeySchema) -> tuple[flow.QueueFlow, ...]:
    """`read` over an asyncio client."""
    async with client.pipeline(transaction=False) as pipe:
        read_pipe(pipe, schema)
        return read_reply(await pipe.execute(raise_on_error=False), schema)


READS = 4
"""The commands `read_pipe` queues."""


def read_pipe(pipe: Any, schema: keys.KeySchema) -> None:
    """Queue the read of both flow hashes on `pipe` (`READS` commands; `hashes` reads the
    replies)."""
    pipe.type(schema.flow)
    pipe.type(schema.flow_state)
    pipe.hgetall(schema.flow)
    pipe.hgetall(schema.flow_state)


def _replies(replies: list[Any], schema: keys.KeySchema) -> list[Any]:
    """The pipeline's replies (TYPE, TYPE, HGETALL, HGETALL), checked: a key of another type is
    named (FlowTypeError, before the HGETALL's bare WRONGTYPE), any other refusal raised."""
    kind, state_kind = replies[:2]
    for reply in (kind, state_kind):
        if isinstance(reply, Exception):
            raise reply
    _hashes([str(kind), str(state_kind)], schema)
    for reply in replies[2:]:
        if isinstance(reply, Exception):
            raise reply
    return replies


def hashes(replies: list[Any], schema: keys.KeySchema) -> tuple[dict[str, str], dict[str, str]]:
    """The control and state hashes from `read_pipe`'s replies; FlowTypeError for a key of
    another type, any other refusal (NOPERM...) raised."""
    _, _, control, state = _replies(replies, schema)
    return ({_str(k): _str(v) for k, v in control.items()},
            {_str(k): _str(v) for k, v in state.items()})


def _str(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def read_reply(replies: list[Any], schema: keys.KeySchema) -> tuple[flow.QueueFlow, ...]:
    """Every queue's flow control from the replies of `read_pipe` (executed with
    raise_on_error=False, on a caller's own pipeline: the console's refresh); FlowTypeError or
    the refusal when a read failed."""
    control, state = hashes(replies, schema)
    return flow.read(schema.queue_keys, control, state)


def pause(client: redis.Redis, schema: keys.KeySchema, queue: str, *, at: float,
          who: str) -> bool:
    """Pause `queue` for an incident; False when `taskqueue pause` had paused it already."""
    _hashes([str(client.type(schema.flow)), "none"], schema)
    return bool(client.hsetnx(schema.flow, flow.PAUSED_CLI + queue,
                              flow.pause_record(at=at, who=who)))


def resume(client: redis.Redis, schema: keys.KeySchema, queue: str) -> tuple[bool, bool]:
    """Lift `taskqueue pause`'s pause of `queue`: (whether it was paused by the CLI, whether
    spec.queues[].paused still pauses it)."""
    _hashes([str(client.type(schema.flow)), "none"], schema)
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(schema.flow, flow.PAUSED_CLI + queue)
        pipe.hexists(schema.flow, flow.PAUSED + queue)
        removed, by_spec = pipe.execute()
    return bool(removed), bool(by_spec)
