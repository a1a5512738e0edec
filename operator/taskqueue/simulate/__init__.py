"""Replay traffic against a TaskQueue's scaling, without a cluster: `taskqueue simulate`.

`trace` (CSV or generators) -> `world` (queues, pods, slots, the ReplicaSet) driven by a scaler
from `scalers` (this operator through the real `policy.decide` and `quiesce`, or a KEDA/HPA
model) -> `run.simulate` -> `run.Result`. Everything here is pure and deterministic per seed.
"""
