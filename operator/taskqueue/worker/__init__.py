"""The taskqueue worker: takes tasks from the Redis queues of one TaskQueue and runs a handler.

Modules, one purpose each:
`config` (settings from the operator's compiled settings, a manifest and flags), `store` (the
Redis scripts the worker calls), `resp` / `resperrors` (its own Redis connection and errors),
`handlers` (python and command handler adapters), `wakeup` (idle wake-up via client-side
tracking pushes), `heartbeat` (registration and recovery of dead workers), `dispatch` (the one
fetch/ack thread: one fetch.lua call per wake-up for all slots), `fetching` (the fetch strategy
and its Redis error policy), `slot` (one consume thread), `aslot` (a consume slot of a coroutine
handler, on the event loop), `runner` (the threads of one worker process, drain on SIGTERM),
`lastcalls` (a slot's Redis calls while the worker stops), `wrongtype` (queue keys of the wrong
type are skipped), `backoff` (retry delays), `deferred` (start-up: redis.asyncio loaded only when
used), `logs` (log format), `main` (the `taskqueue-worker` command), `builtin` (demo handlers).
"""

from taskqueue.worker import deferred

deferred.install()  # before any worker module imports redis: see deferred.py
