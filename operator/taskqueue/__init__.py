"""taskqueue: Redis work queues that autoscale on Kubernetes, and a worker that never loses a task.

Packages by role (docs/architecture.md): `client` (the producer API), `worker` (the consume loop,
`taskqueue-worker`), `controller` (the operator, `taskqueue-operator`), `cli` (the admin tool,
`taskqueue`), `simulate` (replays traffic through the scaling), `redisio` (Redis access),
`scaling` (pure scaling maths), `api` (the TaskQueue models and CRD), `wire` (key names, envelope,
Lua scripts), `telemetry` (metrics and logs). This file imports nothing: the worker's start-up
time depends on it.
"""

__version__ = "0.1.0"
