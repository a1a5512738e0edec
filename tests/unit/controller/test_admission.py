"""`taskqueue.controller.admission.WorkerRules`: what a TaskQueue may run and scale (pure,
table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest, models
from taskqueue.controller import admission, workload
from taskqueue.controller.main import parse_args


def taskqueue(**spec: Any) -> models.TaskQueue:
    base: dict[str, Any] = {"redis": {"url": "redis://redis:6379/0"}, "queues": [{"key": "q"}]}
    return manifest.parse({"kind": "TaskQueue", "metadata": {"name": "t", "namespace": "n"},
                           "spec": {**base, **spec}})


TEAM = admission.WorkerRules(image_prefixes=("registry.example/team/", "ghcr.io/ok/"))


@pytest.mark.parametrize(
    ("rules", "worker", "problem"),
    [
        pytest.param(admission.WorkerRules(), {"image": "evil.io/x"}, None, id="no-rules"),
        pytest.param(TEAM, {"image": "registry.example/team/w:1"}, None, id="allowed"),
        pytest.param(TEAM, {"image": "ghcr.io/ok/w@sha256:ab"}, None, id="second-prefix"),
        pytest.param(TEAM, {"image": "evil.io/x:1"},
                     "spec.worker.image 'evil.io/x:1' is not allowed here: use an image under one "
                     "of registry.example/team/, ghcr.io/ok/", id="refused"),
        pytest.param(TEAM, {"image": "registry.example/team-evil/x"},
                     "spec.worker.image 'registry.example/team-evil/x' is not allowed",
                     id="prefix-is-not-a-substring"),
        pytest.param(TEAM, {}, "spec.worker.image is unset and the default image", id="default"),
        pytest.param(admission.WorkerRules(image_prefixes=(workload.DEFAULT_IMAGE.split(":")[0],)),
                     {}, None, id="default-allowed"),
    ],
)
def test_image_problem(rules: admission.WorkerRules, worker: dict[str, Any],
                       problem: str | None) -> None:
    found = rules.image_problem(taskqueue(worker=worker))
    assert (found is None) is (problem is None)
    if problem is not None:
        assert found is not None and found.startswith(problem)


LABELLED = admission.WorkerRules(scale_target_label=("taskqueue.dev/scalable", "true"))


@pytest.mark.parametrize(
    ("rules", "ref", "labels", "refused"),
    [
        pytest.param(LABELLED, {"name": "api"}, {"taskqueue.dev/scalable": "true"}, False,
                     id="labelled"),
        pytest.param(LABELLED, {"name": "api"}, {}, True, id="unlabelled"),
        pytest.param(LABELLED, {"name": "api"}, {"taskqueue.dev/scalable": "yes"}, True,
                     id="other-value"),
        pytest.param(LABELLED, None, {}, False, id="owned-deployment"),
        pytest.param(admission.WorkerRules(), {"name": "api"}, {}, False, id="no-rule"),
    ],
)
def test_scale_target_problem(rules: admission.WorkerRules, ref: dict[str, str] | None,
                              labels: dict[str, str], refused: bool) -> None:
    tq = taskqueue(**({"scaleTargetRef": ref} if ref else {}))
    found = rules.scale_target_problem(tq, labels)
    assert (found is not None) is refused
    if found is not None:
        assert found.startswith("spec.scaleTargetRef.name: Deployment 'api' lacks the label "
                                "taskqueue.dev/scalable=true")
        assert "kubectl label deployment api taskqueue.dev/scalable=true" in found


@pytest.mark.parametrize(
    ("argv", "rules"),
    [
        pytest.param([], admission.WorkerRules(), id="default"),
        pytest.param(["--allowed-image-prefix", "a/", "--allowed-image-prefix", "b/",
                      "--scale-target-label", "k=v"],
                     admission.WorkerRules(("a/", "b/"), ("k", "v")), id="both"),
    ],
)
def test_operator_flags(argv: list[str], rules: admission.WorkerRules) -> None:
    assert parse_args(argv).worker_rules == rules


def test_a_bad_label_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--scale-target-label", "novalue"])
    assert exit_.value.code == 2
    assert "--scale-target-label 'novalue': expected KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--sharding", "--shard-renew-seconds", "8"], "--shard-renew-seconds 8.0: must be above 0 "
     "and under half of --shard-lease-seconds (15.0)"),
    (["--sharding", "--no-leader-election"], "not allowed with argument"),
])
def test_bad_sharding_flags_are_usage_errors(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
