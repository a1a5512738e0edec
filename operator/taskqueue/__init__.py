"""taskqueue: Redis work queues that autoscale on Kubernetes, and a worker that never loses a task.

Modules: `models` (the TaskQueue API), `keys` (Redis key schema, envelope, Lua scripts),
`queueops` (shared Redis reads and recovery), `observation` (what a poll saw), `worker` (the
consume loop), `policy` (pure scaling decisions), `handlers`/`kube` (the operator), `cli` (admin).
"""

__version__ = "0.1.0"
