"""`taskqueue simulate --from-history` end to end on a real redis-server: a real worker serves
tasks of known service times, the operator's own poll path writes the history (the observe call
with its appends, `policy.decide`, `journal.after_poll`, as `Poller.poll` runs them), and the CLI,
run as a subprocess, rebuilds the traffic from it and replays it against a proposed manifest
beside the current one and the KEDA models. Its one-line errors: no history yet, `--since`
beyond the history kept, a proposed manifest of another TaskQueue, a Redis it cannot reach."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest
from taskqueue.api.models import TaskQueue
from taskqueue.controller import journal
from taskqueue.controller.observe import observe
from taskqueue.scaling import policy
from taskqueue.wire import flow, keys
from tests.fixtures.redis_server import RedisServer
from tests.helpers import handlers as test_handlers
from tests.helpers.cli import Run
from tests.helpers.worker import in_process, make_config, stop_all, wait_done

QUEUES = [{"key": "vip"}, {"key": "normal"}]
WORKER = {"concurrency": 2, "heartbeatSeconds": 0.5}
PUSHES = {2: [("vip", 0.2)] * 6, 4: [("normal", 0.4)] * 3, 7: [("vip", 0.2)] * 6,
          9: [("normal", 0.4)] * 3}
"""Poll number -> the tasks pushed after it (queue, service seconds): 12 vip, 6 normal."""


def document(url: str, *, name: str = "thumbs", **scaling: Any) -> dict[str, Any]:
    return {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": name, "namespace": "media"},
            "spec": {"redis": {"url": url}, "queues": QUEUES, "worker": WORKER,
                     "history": {"intervalSeconds": 1},
                     "scaling": {"maxReplicas": 5, "idleCooldownSeconds": 10, **scaling}}}


def write(tmp_path: Path, doc: dict[str, Any], name: str) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


async def operate(tq: TaskQueue, url: str, r: redis.Redis, *, polls: int,
                  every: float = 0.25) -> None:
    """`polls` polls of the operator's poll path (one pod, one ready), pushing PUSHES."""
    schema, client = keys.KeySchema.from_spec(tq.spec), aioredis.Redis.from_url(url)
    kept, state = journal.Journal(), policy.PolicyState(replicas=1)
    try:
        for n in range(polls):
            observed = await observe(client, url, tq, schema, appends=kept.pending)
            assert observed.error is None and not observed.refused
            if observed.sent:
                kept = replace(kept, pending=())
            now = time.time()
            decision = policy.decide(spec=tq.spec.scaling, observation=observed.observation,
                                     state=replace(state, replicas=1), now=now,
                                     concurrency=tq.spec.worker.concurrency,
                                     queue_order=schema.queue_keys,
                                     flow=flow.declared(tq.spec.queues))
            state = decision.state
            kept = journal.after_poll(kept, spec=tq.spec.history, schema=schema,
                                      outcome=policy.Outcome(decision),
                                      observation=observed.observation,
                                      fleet=journal.Fleet(1, 1, 1), now=now)
            for queue, seconds in PUSHES.get(n, []):
                r.lpush(queue, keys.wrap(f"{queue}:{seconds}", enqueued_at=time.time()))
            await asyncio.sleep(every)
    finally:
        await client.aclose()


def simulate(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "taskqueue.cli.main", "simulate", *argv],
                          capture_output=True, text=True, timeout=300, check=False)


@dataclass(frozen=True)
class History:
    """A TaskQueue's history in a redis-server of its own: the current manifest's path."""

    url: str
    current: str


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """The current manifest, its TaskQueue's history written (6 s of real polls): 18 tasks served
    (after one per queue before the history begins). Written once for the module's replays, on
    a server of its own (the session server is flushed before each test): they only read it."""
    root = tmp_path_factory.mktemp("history")
    server = RedisServer(data_dir=root / "redis")
    server.start()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        current = document(server.url, minReplicas=2)
        config = make_config(server.url, worker={
            "handler": "tests.helpers.handlers:sleep_then_record", **WORKER}, queues=QUEUES)
        with pytest.MonkeyPatch.context() as env:
            env.setenv(test_handlers.URL_ENV, server.url)
            worker = in_process(config)
            worker.start()
            try:
                # a TaskQueue that ran before: each queue's taken counter is there (with none, a
                # poll cannot tell which queue the tasks taken since the last one came from:
                # `arrivals.entered`); their times may be reported late
                for queue, seconds in (("vip", 0.2), ("normal", 0.4)):
                    r.lpush(queue, keys.wrap(f"{queue}:{seconds}"))
                wait_done(r, 2)
                # polls every 0.25 s for 6 s: points of 1 s; the tasks are done well before the
                # last ones
                asyncio.run(operate(manifest.parse(current), server.url, r, polls=24))
                assert len(wait_done(r, 20, timeout=10)) == 20
            finally:
                stop_all([worker])
        assert r.xlen("vip:history") >= 4
        r.close()
        yield History(url=server.url, current=write(root, current, "current.json"))
    finally:
        server.stop()


def test_the_replay_rebuilds_the_traffic_and_compares_the_manifests(
        history: History, tmp_path: Path) -> None:
    proposed = write(tmp_path, document(history.url, minReplicas=0), "proposed.json")
    done = simulate("--from-history", "thumbs", "--current", history.current, "-f", proposed,
                    "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["taskqueue"] == "media/thumbs"
    assert got["tasks"] == {"vip": 12, "normal": 6}  # every task, in its queue
    assert got["service_seconds"]["vip"] == pytest.approx(0.2, abs=0.05)
    assert got["service_seconds"]["normal"] == pytest.approx(0.4, abs=0.05)
    assert got["unknown_intervals"] == 0 and got["no_squares"] == []
    assert 4 <= got["window"]["seconds"] <= 8
    assert got["recorded"]["max_replicas"] == 1
    assert got["recorded"]["worker_seconds"] == pytest.approx(got["window"]["seconds"], rel=0.01)
    current, new = got["results"][:2]
    assert [r["scaler"] for r in got["results"]] == ["current", "proposed", "keda", "keda-tuned"]
    assert all(r["tasks"] == 18 and r["unserved_tasks"] == 0 for r in got["results"])
    # minReplicas 2 holds two pods through the 600 s tail; minReplicas 0 lets them go
    assert new["worker_seconds"] < current["worker_seconds"] / 2
    assert got["change"]["worker_seconds"] == [current["worker_seconds"], new["worker_seconds"]]
    assert set(got["change"]["p95_wait_seconds"]) == {"vip", "normal"}

    timeline = tmp_path / "timeline.csv"
    table = simulate("--from-history", "thumbs", "--current", history.current, "-f", proposed,
                     "--timeline", str(timeline))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("history of media/thumbs: ") and "18 tasks (vip 12, normal 6)" in \
        lines[0]
    assert lines[1].startswith("recorded: ") and "max 1 replicas" in lines[1]
    assert lines[-1].startswith("proposed vs current: worker-seconds ")
    assert "p95 wait vip " in lines[-1]
    rows = timeline.read_text().splitlines()
    assert rows[0] == "scaler,time,replicas,backlog"
    assert {r.split(",")[0] for r in rows[1:]} == {"current", "proposed", "keda", "keda-tuned"}


def test_since_cuts_the_window_within_the_history_kept(history: History, cli: Run) -> None:
    # in-process, so the window is where it was asked for: the last 3 s of the history
    with redis.Redis.from_url(history.url, decode_responses=True) as r:
        newest = int(r.xrevrange("vip:history", count=1)[0][0].split("-")[0])
    since = f"{time.time() - newest / 1000 + 3:.1f}"
    result = cli("simulate", "--from-history", "thumbs", "--current", history.current,
                 "-f", history.current, "--since", since, "--json")
    assert result.code == 0, result.err
    got = result.json()
    assert 2 <= got["window"]["seconds"] <= 4.5
    assert got["change"]["worker_seconds"][0] == got["change"]["worker_seconds"][1]
    done = simulate("--from-history", "thumbs", "--current", history.current,
                    "-f", history.current, "--since", "1d")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.startswith("taskqueue: --since 1d reaches back before the history kept "
                                  "for media/thumbs, which starts ")
    assert "give --since " in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize(("proposed", "argv", "code", "message"), [
    pytest.param({}, [], 3, "no history yet for media/thumbs: the operator writes a point every "
                 "spec.history.intervalSeconds", id="no-history-yet"),
    pytest.param({"name": "other"}, [], 3, "is TaskQueue 'media/other', not 'media/thumbs' "
                 "(--from-history): a proposed manifest replays the history of its own "
                 "TaskQueue", id="proposed-for-another-taskqueue"),
    pytest.param({}, ["--since", "2 weeks"], 2, "--since: '2 weeks' is not a duration; use "
                 "e.g. 30s, 5m, 2h, 1d or seconds", id="unreadable-since"),
    pytest.param({}, ["--since", "30d"], 2, "--since '30d' is out of range; give a duration "
                 "above 0 and at most 7d", id="since-beyond-any-history"),
    pytest.param({}, ["--redis-url", "redis://127.0.0.1:1/0"], 4, "cannot reach Redis at "
                 "redis://127.0.0.1:1/0", id="redis-unreachable"),
])
def test_what_cannot_be_replayed_is_one_line(
        cli: Run, redis_url: str, tmp_path: Path, proposed: dict[str, str], argv: list[str],
        code: int, message: str) -> None:
    current = write(tmp_path, document(redis_url), "current.json")
    other = write(tmp_path, document(redis_url, **proposed), "proposed.json")
    result = cli("simulate", "--from-history", "thumbs", "--current", current, "-f", other,
                 *argv)
    assert (result.code, result.out) == (code, "")
    assert message in result.err and len(result.err.splitlines()) == 1, result.err


def test_current_for_another_taskqueue_is_one_line(cli: Run, redis_url: str,
                                                   tmp_path: Path) -> None:
    current = write(tmp_path, document(redis_url), "current.json")
    result = cli("simulate", "--from-history", "thumbnails", "--current", current, "-f", current)
    assert result.code == 3
    assert result.err == (f"taskqueue: --current {current} is TaskQueue 'thumbs', not "
                          "'thumbnails' (--from-history); give the manifest of 'thumbnails'\n")
