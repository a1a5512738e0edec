"""`taskqueue simulate`: a manifest and a trace in, the comparison table (or JSON) out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskqueue.cli.main import main

MANIFEST = """apiVersion: taskqueue.dev/v1alpha1
kind: TaskQueue
metadata: {name: demo}
spec:
  redis: {url: "redis://redis:6379/0"}
  queues: [{key: high}, {key: low}]
  worker: {concurrency: 2}
  scaling: {maxReplicas: 20, targetWaitSeconds: {high: 2}, idleCooldownSeconds: 30}
"""


@pytest.fixture
def tq(tmp_path: Path) -> Path:
    path = tmp_path / "tq.yaml"
    path.write_text(MANIFEST)
    return path


def test_json_results_for_each_scaler(tq: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "-f", str(tq), "--generator", "two-priority", "--rate", "1",
                 "--duration", "600", "--json"])
    assert code == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["scaler"] for r in results] == ["operator", "keda", "keda-tuned"]
    ours = results[0]
    assert set(ours["wait_seconds"]) == {"high", "low"}
    assert ours["busy_pods_deleted"] == 0 and ours["interrupted_tasks"] == 0
    assert ours["worker_seconds"] > 0


def test_the_cluster_delays_reach_the_simulation(
        tq: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 40 tasks of 10 s at once: every pod's start-up and the API delay add to the waits, the
    # exit delay to the bill (each drained pod is billed until it has exited)
    csv = tmp_path / "trace.csv"
    csv.write_text("".join("0,high,10.0\n" for _ in range(40)))

    def run(*flags: str) -> dict[str, float]:
        assert main(["simulate", "-f", str(tq), "--trace", str(csv), "--compare", "",
                     "--json", *flags]) == 0
        [ours] = json.loads(capsys.readouterr().out)
        return {"p50": ours["wait_seconds"]["high"]["p50"], "ws": ours["worker_seconds"]}

    base = run("--startup", "1", "--api-delay", "0", "--exit-delay", "0")
    slow = run("--startup", "1", "--api-delay", "2", "--exit-delay", "0")
    crowded = run("--startup", "1", "--startup-per-pod", "0.5", "--api-delay", "0",
                  "--exit-delay", "0")
    lingering = run("--startup", "1", "--api-delay", "0", "--exit-delay", "5")
    assert slow["p50"] >= base["p50"] + 1.5  # the 2 s, less where the first poll falls
    assert crowded["p50"] > base["p50"] + 1
    assert lingering["ws"] > base["ws"] + 5 and lingering["p50"] == base["p50"]


def test_csv_trace_table_plot_and_timeline(tq: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "trace.csv"
    csv.write_text("".join(f"{t},high,1.0\n" for t in range(0, 120, 1)))
    timeline = tmp_path / "timeline.csv"
    code = main(["simulate", "-f", str(tq), "--trace", str(csv), "--compare", "no-quiesce",
                 "--plot", "--timeline", str(timeline)])
    out = capsys.readouterr().out
    assert code == 0
    assert "120 tasks over 119s (high 120, low 0)" in out
    assert "operator-no-quiesce" in out and "replicas (max" in out
    # the low queue had no task: no wait row for it (it did not wait 0 s)
    assert " low " not in out.split("\n", 1)[1]
    assert timeline.read_text().startswith("scaler,time,replicas,backlog\noperator,0.0,")


def test_a_queue_without_tasks_has_no_waits_and_long_names_align(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tq.yaml"
    path.write_text(MANIFEST.replace("{key: high}, {key: low}",
                                     "{key: 'emails:high-priority'}, {key: 'emails:bulk'}")
                    .replace("{high: 2}", "{'emails:high-priority': 2}"))
    csv = tmp_path / "trace.csv"
    csv.write_text("".join(f"{t},emails:high-priority,1.0\n" for t in range(30)))
    assert main(["simulate", "-f", str(path), "--trace", str(csv), "--json"]) == 0
    assert [set(r["wait_seconds"]) for r in json.loads(capsys.readouterr().out)] == [
        {"emails:high-priority"}] * 3
    assert main(["simulate", "-f", str(path), "--trace", str(csv)]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:5]
    assert len({len(line) for line in (header, *rows)}) == 1  # the columns line up


@pytest.mark.parametrize("args, code, message", [
    pytest.param(["--trace", "/nonexistent.csv"], 3, "cannot read", id="missing-trace"),
    pytest.param(["--compare", "hpa"], 2, "--compare: unknown 'hpa'", id="bad-compare"),
    pytest.param(["--rate", "0"], 2, "--rate 0.0 is out of range; give tasks per second > 0",
                 id="bad-rate"),
    pytest.param(["--rate", "nan"], 2, "--rate nan is out of range", id="nan-rate"),
    pytest.param(["--duration", "inf"], 2, "--duration inf is out of range; give seconds > 0 "
                 "and <= 2592000 (30 days)", id="endless-duration"),
    pytest.param(["--tick", "nan"], 2, "--tick nan is out of range", id="nan-tick"),
    pytest.param(["--history", "-1"], 2, "--history -1 is out of range; give a whole number "
                 ">= 0", id="bad-history"),
    pytest.param(["--grace=-inf"], 2, "--grace -inf is out of range", id="bad-grace"),
    pytest.param(["--startup=-1"], 2, "--startup -1.0 is out of range; give seconds from 0 to "
                 "3600", id="bad-startup"),
    pytest.param(["--startup-per-pod", "nan"], 2, "--startup-per-pod nan is out of range",
                 id="nan-startup-per-pod"),
    pytest.param(["--api-delay=-0.1"], 2, "--api-delay -0.1 is out of range", id="bad-api-delay"),
    pytest.param(["--exit-delay", "inf"], 2, "--exit-delay inf is out of range",
                 id="endless-exit-delay"),
    pytest.param(["--poll-phase=-2"], 2, "--poll-phase -2.0 is out of range", id="bad-poll-phase"),
    pytest.param(["--since", "1h"], 2, "--since belongs to --from-history NAME; add it or drop "
                 "--since", id="since-without-from-history"),
    pytest.param(["--redis-url", "redis://r"], 2, "--redis-url belongs to --from-history NAME",
                 id="redis-url-without-from-history"),
    pytest.param(["--from-history", "demo", "--since", "yesterday"], 2, "--since: 'yesterday' "
                 "is not a duration; use e.g. 30s, 5m, 2h, 1d or seconds", id="unreadable-since"),
    pytest.param(["--from-history", "demo", "--since", "0"], 2, "--since '0' is out of range; "
                 "give a duration above 0 and at most 7d", id="zero-since"),
    pytest.param(["--from-history", "demo", "--current", "/nonexistent.yaml"], 3,
                 "cannot read manifest", id="missing-current"),
])
def test_errors_name_the_option(tq: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                code: int, message: str) -> None:
    assert main(["simulate", "-f", str(tq), *args]) == code
    assert message in capsys.readouterr().err


def test_from_history_is_another_source_than_a_trace(
        tq: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "-f", str(tq), "--from-history", "demo", "--trace", "t.csv"])
    assert exit_.value.code == 2
    assert "argument --trace: not allowed with argument --from-history" in \
        capsys.readouterr().err


def test_history_makes_a_known_service_time(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # one spike of 30 two-second tasks, pods up in 5 s: a new TaskQueue gives each task a slot
    # (the service time unknown), one with history sizes it by its wait target, with fewer pods
    path = tmp_path / "tq.yaml"
    path.write_text(MANIFEST.replace("idleCooldownSeconds: 30", "podStartupSeconds: 5"))
    args = ["simulate", "-f", str(path), "--generator", "spikes", "--rate", "0.5", "--service",
            "2", "--duration", "200", "--compare", "", "--json"]
    assert main(args) == 0
    new = json.loads(capsys.readouterr().out)[0]
    assert main([*args, "--history", "300"]) == 0
    warm = json.loads(capsys.readouterr().out)[0]
    assert warm["max_replicas"] < new["max_replicas"]
    assert warm["worker_seconds"] < new["worker_seconds"]


def test_two_priority_needs_two_queues(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(MANIFEST.replace("[{key: high}, {key: low}]", "[{key: high}]"))
    assert main(["simulate", "-f", str(path), "--generator", "two-priority"]) == 3
    assert "needs two queues" in capsys.readouterr().err
