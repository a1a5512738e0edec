"""The wire-format test vectors (tests/vectors/envelopes.json) through a real worker process:
what a producer in any language can check itself against. Each element is LPUSHed as it is; the
handler's context must match `runs`, or the element must be dead-lettered unrun with `dead`."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from tests.helpers import handlers as h
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running

VECTORS = json.loads((Path(__file__).parents[2] / "vectors" / "envelopes.json").read_text())
Q = "q"


def test_every_vector_runs_or_is_dead_lettered_as_it_says(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    vectors = VECTORS["vectors"]
    for v in vectors:
        redis_sync.lpush(Q, v["element"])
    runs = [v["runs"] for v in vectors if "runs" in v]
    dead = sorted(v["dead"] for v in vectors if "dead" in v)
    with running(redis_url, "--queue", Q, "--handler", "tests.helpers.handlers:record_envelope",
                 log_path=tmp_path / "worker.log"):
        wait_for("every vector handled", lambda: redis_sync.llen(h.ENVELOPES) == len(runs)
                 and redis_sync.llen(f"{Q}:dead") == len(dead))
    got = [json.loads(x) for x in redis_sync.lrange(h.ENVELOPES, 0, -1)]
    assert got == runs  # in push order: one worker, one slot, FIFO
    records = [json.loads(x) for x in redis_sync.lrange(f"{Q}:dead", 0, -1)]
    assert sorted(r["error"] for r in records) == dead
    by_error = {r["error"]: r for r in records}
    for v in vectors:
        if "dead" in v:
            assert by_error[v["dead"]]["payload"] == v["element"]  # kept byte for byte
