"""The `taskqueue-worker` command line: settings from a manifest, the environment and flags, then
the worker until SIGTERM (`taskqueue.worker.main` imports this module and calls `main`).

Settings come from `-f taskqueue.yaml`, else the settings the operator compiled for worker pods
(`$TASKQUEUE_WORKER_SETTINGS`, read without pydantic: `taskqueue.api.workersettings`), else the
`TASKQUEUE_MANIFEST` env (JSON), else from flags alone (`--queue` at least); flags override the
manifest (a flag that changes the spec makes the worker validate the manifest again).
Logs: `--log-json` / `$TASKQUEUE_LOG_JSON=1` and `--log-level` /
`$TASKQUEUE_LOG_LEVEL` (the env is how a worker pod sets them; flags win). Exit status: 0 after
a drain, 2 for bad settings or an unusable handler (reported before any task is taken).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from taskqueue.api import limits, workersettings
from taskqueue.worker import config as cfg
from taskqueue.worker import handlers, logs, resp
from taskqueue.worker.runner import Worker

if TYPE_CHECKING:  # pydantic and the models load only when a manifest must be validated
    from taskqueue.api.models import TaskQueue, TaskQueueSpec

log = logging.getLogger("taskqueue.worker")


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def env_flag(name: str) -> bool:
    """An on/off environment setting: 1/true/yes/on (any case) is on, anything else off."""
    return os.environ.get(name, "").strip().lower() in TRUE_WORDS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="taskqueue-worker",
                                description="Run a worker for one TaskQueue until SIGTERM.")
    p.add_argument("-f", "--file", help="TaskQueue manifest (YAML); default $TASKQUEUE_MANIFEST")
    p.add_argument("--redis-url", help="overrides spec.redis (also $TASKQUEUE_REDIS_URL)")
    p.add_argument("--worker-id", help="default $TASKQUEUE_WORKER_ID or <host>-<pid>-<random>")
    p.add_argument("--queue", action="append", metavar="KEY[:zset][@LIMIT]",
                   help="queue key in priority order (repeatable); replaces spec.queues")
    p.add_argument("--handler", help="python handler 'package.module:function'")
    p.add_argument("--command", nargs="+", help="command per task, payload on stdin")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--prefetch", type=int)
    p.add_argument("--delivery", choices=["AtLeastOnce", "AtMostOnce"])
    p.add_argument("--max-attempts", type=int)
    p.add_argument("--backoff", type=float, help="first retry delay in seconds")
    p.add_argument("--task-timeout", type=float, help="seconds before a task fails")
    p.add_argument("--heartbeat", type=float, help="heartbeat period in seconds")
    p.add_argument("--grace", type=float, help="seconds to finish tasks after SIGTERM")
    p.add_argument("--key-prefix", help="prefix of the bookkeeping keys")
    p.add_argument("--dead-letter-key")
    p.add_argument("--dead-letter-max-length", type=int, metavar="N",
                   help="newest records the dead-letter list keeps")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--tracking", action="store_true", default=None,
                   help="keep the task index (spec.worker.tracking) for `taskqueue status`")
    p.add_argument("--tracing", choices=["parent", "link"], default=None,
                   help="OpenTelemetry span per attempt, the producer's span as its parent or "
                        "a link (spec.worker.tracing; OTEL_* environment variables)")
    p.add_argument("--idempotency-window", type=float, metavar="S",
                   help="idempotent consumption: skip ids completed within S seconds")
    p.add_argument("--metrics-address",
                   default=os.environ.get("TASKQUEUE_METRICS_ADDRESS") or "0.0.0.0",
                   help="address the metrics listen on (default $TASKQUEUE_METRICS_ADDRESS "
                        "or 0.0.0.0)")
    p.add_argument("--log-json", action=argparse.BooleanOptionalAction,
                   default=env_flag("TASKQUEUE_LOG_JSON"),
                   help="one JSON object per log line (default $TASKQUEUE_LOG_JSON=1)")
    p.add_argument("--log-level", default=os.environ.get("TASKQUEUE_LOG_LEVEL") or "INFO",
                   help="default $TASKQUEUE_LOG_LEVEL or INFO")
    p.add_argument("--print-settings", action="store_true",
                   help="validate the manifest and flags, print them compiled for "
                        "$TASKQUEUE_WORKER_SETTINGS (a start without pydantic) and exit")
    return p


def _queue(arg: str) -> dict[str, Any]:
    key, _, limit = arg.partition("@")
    kind = "list"
    if key.endswith(":zset"):
        key, kind = key.removesuffix(":zset"), "zset"
    q: dict[str, Any] = {"key": key, "type": kind}
    if limit:
        q["starvationLimit"] = int(limit)
    return q


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Manifest spec fields set by flags, by section."""
    worker = {"handler": args.handler, "command": args.command,
              "concurrency": args.concurrency, "prefetch": args.prefetch,
              "taskTimeoutSeconds": args.task_timeout, "heartbeatSeconds": args.heartbeat,
              "metricsPort": args.metrics_port, "tracking": args.tracking,
              "tracing": ({"producerSpan": args.tracing} if args.tracing else None),
              "idempotency": ({"windowSeconds": args.idempotency_window}
                              if args.idempotency_window is not None else None)}
    retry = {"maxAttempts": args.max_attempts, "backoffSeconds": args.backoff,
             "deadLetterKey": args.dead_letter_key,
             "deadLetterMaxLength": args.dead_letter_max_length}
    top = {"delivery": args.delivery, "keyPrefix": args.key_prefix,
           "queues": [_queue(q) for q in args.queue] if args.queue else None}
    return {name: {k: v for k, v in section.items() if v is not None}
            for name, section in (("worker", worker), ("retry", retry), ("", top))}


def load_file(path: str) -> TaskQueue:
    """The manifest at `path` (-f); a ManifestError naming the file when it cannot be read."""
    from taskqueue.api import manifest

    try:
        return manifest.load(path)
    except IsADirectoryError:
        raise manifest.ManifestError(f"-f {path}: is a directory; pass a manifest file") from None
    except FileNotFoundError:
        raise manifest.ManifestError(f"-f {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise manifest.ManifestError(f"-f {path}: cannot read ({type(exc).__name__})") from None


def spec_from(args: argparse.Namespace) -> TaskQueueSpec:
    """The spec: manifest file, else $TASKQUEUE_MANIFEST, else flags only; flags override."""
    from taskqueue.api import manifest

    if args.file:
        data = load_file(args.file).model_dump(exclude_none=True)
    elif os.environ.get("TASKQUEUE_MANIFEST"):
        data = manifest.loads_json(os.environ["TASKQUEUE_MANIFEST"]).model_dump(
            exclude_none=True)
    else:
        if not args.queue:
            raise manifest.ManifestError("pass -f taskqueue.yaml, set TASKQUEUE_MANIFEST, "
                                         "or give at least one --queue KEY")
        # a placeholder: config.from_spec takes --redis-url / $TASKQUEUE_REDIS_URL (and checks
        # it, naming the setting), and without either, the local default
        data = {"kind": "TaskQueue",
                "spec": {"redis": {"url": "redis://127.0.0.1:6379/0"}, "queues": []}}
    spec = data["spec"]
    over = _overrides(args)
    spec.update(over[""])
    for section in ("worker", "retry"):
        spec.setdefault(section, {}).update(over[section])
    if over["worker"].get("handler"):
        spec["worker"].pop("command", None)
    elif over["worker"].get("command"):
        spec["worker"].pop("handler", None)
    return manifest.parse(data).spec


def config_from(args: argparse.Namespace) -> cfg.WorkerConfig:
    """The operator's compiled settings when the command line changes nothing they hold, else
    the spec validated from the manifest (and flags)."""
    compiled = os.environ.get(workersettings.ENV)
    if compiled and not args.file and not any(_overrides(args).values()):
        try:
            declared = workersettings.read(compiled)
        except workersettings.StaleSettingsError as exc:  # an operator of another version
            log.info("%s not used (%s): validating the manifest", workersettings.ENV, exc)
        else:
            return cfg.from_declared(declared, redis_url=args.redis_url,
                                     worker_id=args.worker_id)
    return cfg.from_spec(spec_from(args), redis_url=args.redis_url, worker_id=args.worker_id)


def grace(seconds: float) -> float:
    """`--grace`, within the bounds of spec.worker.terminationGracePeriodSeconds (a wait that
    long is one Python can make); ValueError stating the range otherwise."""
    top = limits.MAX_DURATION_SECONDS
    if not 0 <= seconds <= top:  # NaN fails too
        raise ValueError(f"--grace: {seconds:g} is out of range; use a number of seconds from 0 "
                         f"to {top} ({limits.describe_seconds(top)})")
    return seconds


def build(argv: Sequence[str] | None = None) -> tuple[cfg.WorkerConfig, handlers.Handler, bool]:
    """Config, loaded handler and --log-json from the command line (raises on bad settings)."""
    return build_from(parser().parse_args(argv))


def traced(handler: handlers.Handler, *, producer_span: str) -> handlers.Handler:
    """`handler` in a span per attempt (spec.worker.tracing); HandlerError naming the extra
    when OpenTelemetry is not installed."""
    try:
        from taskqueue.worker import tracing
    except ImportError as exc:
        raise handlers.HandlerError(
            f"spec.worker.tracing is set but OpenTelemetry is not installed ({exc}): install "
            "the extra, pip install 'taskqueue-operator[otel]', or unset spec.worker.tracing"
        ) from None
    return tracing.wrap(handler, producer_span=producer_span)


def build_from(args: argparse.Namespace) -> tuple[cfg.WorkerConfig, handlers.Handler, bool]:
    """`build` for a command line already parsed."""
    logs.setup(json_lines=args.log_json, level=args.log_level)
    config = config_from(args)
    if args.grace is not None:
        config = dataclasses.replace(config, grace_seconds=grace(args.grace))
    handler = handlers.load(handler=config.handler, command=config.command,
                            timeout=config.task_timeout)
    if config.tracing is not None:
        handler = traced(handler, producer_span=config.tracing)
    return config, handler, args.log_json


def print_settings(args: argparse.Namespace) -> None:
    """`--print-settings`: the validated spec (manifest and flags) as the operator compiles it
    for worker pods, for workers started some other way (systemd, a VM)."""
    from taskqueue.api import models

    print(workersettings.dumps(spec_from(args), tls_dir=models.REDIS_TLS_DIR))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        if args.print_settings:
            print_settings(args)
            return 0
        config, handler, _ = build_from(args)
        address = args.metrics_address
    except (handlers.HandlerError, ValueError) as exc:  # a ManifestError is a ValueError
        print(f"taskqueue-worker: {exc}", file=sys.stderr)
        return 2
    if config.metrics_port:
        from taskqueue.telemetry import (
            metrics,  # prometheus_client: only for a worker that serves them
        )

        metrics.serve(metrics.WORKER, port=config.metrics_port, addr=address)
    worker = Worker(config, handler=handler)
    # everything imported so far lives as long as the process: keep it out of the cyclic GC, so
    # a full collection scans only what tasks allocate (a pause of ~20 ms otherwise)
    gc.freeze()
    try:
        return worker.run_until_signal()
    except resp.NoPermissionError as exc:  # refused at registration: say which command, and stop
        print(f"taskqueue-worker: the Redis user lacks a permission: {exc} (the worker's ACL "
              "rule: `python -m taskqueue.redisio.acl worker KEY_PATTERN`, docs/install.md)",
              file=sys.stderr)
        return 2
