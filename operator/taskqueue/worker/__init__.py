"""The taskqueue worker: takes tasks from the Redis queues of one TaskQueue and runs a handler.

Modules, one purpose each:
`config` (settings from a manifest and flags), `store` (the Redis scripts the worker calls),
`handlers` (python and command handler adapters), `backoff` (retry delays), `wakeup` (idle
wake-up via client-side tracking pushes), `heartbeat` (registration and recovery of dead
workers), `slot` (one consume loop), `runner` (the threads of one worker process, drain on
SIGTERM), `logs` (log format), `main` (the `taskqueue-worker` command), `builtin` (demo
handlers).
"""

from taskqueue.worker import deferred

deferred.install()  # before any worker module imports redis: see deferred.py
