"""Which TaskQueue and which Redis a command works on.

Three sources, one result (`Target`): a manifest file (`-f`), a TaskQueue in the cluster read
through the kubeconfig (`--name/--namespace`, the Redis URL read from `spec.redis.urlSecretRef`
when set), or plain flags (`--redis-url`, `--queue`, `--zset-queue`, `--key-prefix`,
`--dead-letter-key`). `--redis-url` always overrides the URL (e.g. a `kubectl port-forward`).
"""

from __future__ import annotations

import argparse
import base64
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskqueue.api import redact
from taskqueue.cli.errors import EXIT_TARGET, EXIT_USAGE, CliError
from taskqueue.redisio import dsn
from taskqueue.wire import keys, keyspace

if TYPE_CHECKING:  # redis-py and pydantic load with the paths that use them
    import redis
    import redis.asyncio as aioredis

    from taskqueue.api import models

DEFAULT_URL = "redis://localhost:6379/0"


@dataclass(frozen=True)
class Target:
    """The Redis URL and, when known, the key schema of one TaskQueue."""

    redis_url: str
    schema: keys.KeySchema | None
    name: str
    spec: models.TaskQueueSpec | None = None
    """The whole spec when the target is a manifest or a cluster object."""

    def require_schema(self, command: str) -> keys.KeySchema:
        if self.schema is None:
            raise CliError(
                f"{command} needs a TaskQueue: pass -f FILE, --name NAME [--namespace NS], "
                "or --queue KEY (repeatable)",
                EXIT_USAGE,
            )
        return self.schema

    def queue_type(self, key: str) -> models.QueueType | None:
        """The declared type of queue `key`, None when this target does not declare it."""
        if self.schema is None:
            return None
        try:
            return self.schema.queue(key).type
        except KeyError:
            return None

    def connect(self, **options: Any) -> redis.Redis:
        """A client for this target (`options`: more redis-py keyword arguments); nothing is
        sent yet. Replies are decoded as UTF-8 with `surrogateescape`: bytes that are not UTF-8
        survive a read and a write unchanged. A Redis that refuses or does not answer the
        first connection is reported at once (exit 4); a connection lost once Redis has
        answered is retried (a failover in the middle of a command)."""
        from taskqueue.redisio import clients

        return clients.sync_client(
            clients.RedisSettings.from_dsn(self.redis_url), retry_first_contact=False,
            decode_responses=True, encoding_errors="surrogateescape", socket_connect_timeout=3,
            socket_timeout=30, **options)

    def connect_async(self, **options: Any) -> aioredis.Redis:
        """An asyncio client for this target (replies decoded, the first contact as in
        `connect`); nothing is sent yet. It has no socket timeout (redis-py's default is 5 s):
        with one, redis-py sends each command through `asyncio.wait_for`, which on Python 3.11
        drops a cancellation (the Ctrl-C of `asyncio.run`) that arrives just as the send
        completes. Callers bound their calls with `asyncio.timeout` instead."""
        from taskqueue.redisio import clients

        return clients.async_client(
            clients.RedisSettings.from_dsn(self.redis_url), retry_first_contact=False,
            decode_responses=True, encoding_errors="surrogateescape", socket_connect_timeout=3,
            socket_timeout=None, **options)


class _QueueAction(argparse.Action):
    """--queue KEY / --zset-queue KEY: append (key, type) in the order given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        queues = list(getattr(namespace, "queues", None) or [])
        queues.append((str(values), "zset" if option_string == "--zset-queue" else "list"))
        namespace.queues = queues


def target_options() -> list[argparse.ArgumentParser]:
    """The parent parser of every command that works on a TaskQueue's Redis: the target
    options."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("target (one of -f, --name, or --queue flags)")
    group.add_argument("-f", "--file", metavar="FILE", help="TaskQueue manifest (YAML or JSON)")
    group.add_argument("--name", help="TaskQueue in the cluster (read through the kubeconfig)")
    group.add_argument("-n", "--namespace", default=None, help="namespace of --name")
    group.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG)")
    group.add_argument("--context", default=None, help="kubeconfig context")
    group.add_argument("--redis-url", default=None,
                       help=f"Redis URL; overrides the manifest's (default {DEFAULT_URL})")
    group.add_argument("--queue", action=_QueueAction, metavar="KEY", dest="queues",
                       help="a list queue key, in priority order (repeatable)")
    group.add_argument("--zset-queue", action=_QueueAction, metavar="KEY", dest="queues",
                       help="a zset (priority) queue key (repeatable)")
    group.add_argument("--key-prefix", default=None, help="default: the first queue key")
    group.add_argument("--dead-letter-key", default=None,
                       help="default: '<first queue key>:dead'")
    return [parser]


def resolve(args: argparse.Namespace) -> Target:
    """The target the parsed options name; CliError when they are inconsistent or unusable."""
    flags = bool(args.queues or args.key_prefix or args.dead_letter_key)
    if args.file and args.name:
        raise CliError("use -f FILE or --name NAME, not both", EXIT_USAGE)
    if (args.file or args.name) and flags:
        raise CliError(
            "--queue/--zset-queue/--key-prefix/--dead-letter-key describe a TaskQueue "
            "without a manifest; drop them or drop -f/--name",
            EXIT_USAGE,
        )
    if args.redis_url:
        _check_url(args.redis_url, "--redis-url")
    if args.file or args.name:
        return resolve_object(args)[1]
    if args.redis_url:
        _check_url(args.redis_url, "--redis-url")
    return _from_flags(args)


def resolve_object(args: argparse.Namespace) -> tuple[models.TaskQueue, Target]:
    """The TaskQueue `args.file` or `args.name` names (the manifest, or the object in the
    cluster through the kubeconfig) and its target, `args.redis_url` overriding its URL."""
    if args.redis_url:
        _check_url(args.redis_url, "--redis-url")
    given = "--redis-url" if args.redis_url else "spec.redis"
    if args.file:
        tq = _load(args.file)
        return tq, from_object(tq, url=args.redis_url or _spec_url(tq, args.file), given=given)
    tq, url = _from_cluster(args)
    return tq, from_object(tq, url=args.redis_url or url, given=given)


def _load(path: str) -> models.TaskQueue:
    """The TaskQueue of the manifest at `path`; CliError when it cannot be read or used."""
    from taskqueue.api import manifest  # pydantic: only a command given a manifest needs it

    try:
        return manifest.load(path)
    except manifest.ManifestError as exc:
        raise CliError(f"bad manifest: {exc}", EXIT_TARGET) from None
    except OSError as exc:
        raise CliError(f"cannot read manifest: {exc}", EXIT_TARGET) from None


def _check_url(url: str, source: str) -> None:
    """CliError naming `source` (never quoting the URL) when `url` cannot be parsed."""
    problem = redact.check(url, field=source)
    if problem is not None:
        raise CliError(problem, EXIT_USAGE if source.startswith("--") else EXIT_TARGET)


def from_object(tq: models.TaskQueue, *, url: str, given: str) -> Target:
    """The target of TaskQueue `tq` on Redis `url` (checked; from `given`): its schema, the DSN
    of its mode, TLS files from TASKQUEUE_REDIS_TLS_DIR; CliError when they do not fit together."""
    ns = tq.metadata.namespace
    name = f"{ns}/{tq.metadata.name}" if ns else tq.metadata.name
    url = dsn.dsn_for(url, tq.spec.redis.mode, sentinel=tq.spec.redis.sentinel)
    _check_url(url, given)  # the DSN of spec.redis's topology (mode cluster: database 0 only)
    url = dsn.with_sentinel_password(
        url, os.environ.get("TASKQUEUE_REDIS_SENTINEL_PASSWORD"))
    tls_dir = os.environ.get("TASKQUEUE_REDIS_TLS_DIR")
    if tq.spec.redis.tls is not None and tls_dir is None and "ssl_ca_certs" not in url:
        raise CliError(
            f"spec.redis.tls: the CA is in Secret {tq.spec.redis.tls.secretName!r}; save its "
            "keys as files in a folder and set TASKQUEUE_REDIS_TLS_DIR to it, or pass "
            "--redis-url 'rediss://...?ssl_ca_certs=/path/ca.crt'", EXIT_USAGE)
    if tls_dir is not None:
        url = dsn.with_tls_dir(url, tq.spec.redis.tls, tls_dir)
    schema = keys.KeySchema.from_spec(tq.spec)
    problem = schema.cluster_problem() if dsn.is_cluster_dsn(url) else None
    if problem:
        raise CliError(problem, EXIT_USAGE)
    return Target(redis_url=url, schema=schema, name=name, spec=tq.spec)


def _spec_url(tq: models.TaskQueue, path: str) -> str:
    if tq.spec.redis.url is not None:
        return tq.spec.redis.url
    ref = tq.spec.redis.urlSecretRef
    assert ref is not None  # the model requires url or urlSecretRef
    raise CliError(
        f"{path}: the Redis URL is in Secret {ref.name!r} (key {ref.key!r}); pass --redis-url, "
        "or --name/--namespace to read the TaskQueue and its Secret from the cluster",
        EXIT_USAGE,
    )


def _from_flags(args: argparse.Namespace) -> Target:
    url = args.redis_url or DEFAULT_URL
    queues = tuple(keys.QueueRef(key=k, type=t) for k, t in (args.queues or []))
    for q in queues:
        if not keyspace.is_valid_key(q.key):
            raise CliError(f"--queue {q.key!r}: not a valid key (1-512 characters, no space or "
                           "control character)",
                           EXIT_USAGE)
    if not queues and not args.dead_letter_key:
        return Target(redis_url=url, schema=None, name="(flags)")
    problem = keyspace.collision([q.key for q in queues], key_prefix=args.key_prefix,
                                 dead_letter=args.dead_letter_key, labels=keyspace.FLAG_LABELS)
    if problem:
        raise CliError(problem, EXIT_USAGE)
    first = queues[0].key if queues else args.dead_letter_key
    schema = keys.KeySchema(
        prefix=args.key_prefix or first,
        queues=queues,
        dead_letter=args.dead_letter_key or keyspace.default_dead_letter(first),
    )
    return Target(redis_url=url, schema=schema, name=first)


def _from_cluster(args: argparse.Namespace) -> tuple[models.TaskQueue, str]:
    # imported here: slow, and only this path needs them; the package is untyped
    import kubernetes
    import urllib3
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    from taskqueue.api import manifest, models

    client: Any = kubernetes.client
    config: Any = kubernetes.config

    try:
        config.load_kube_config(config_file=args.kubeconfig, context=args.context)
        ns = args.namespace or _current_namespace(config, args) or "default"
        api = client.ApiClient()
        obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
            models.GROUP, models.VERSION, ns, models.PLURAL, args.name
        )
    except (ConfigException, OSError) as exc:
        raise CliError(f"kubeconfig: {exc}", EXIT_TARGET) from None
    except ApiException as exc:
        raise _api_error(exc, f"TaskQueue {ns}/{args.name}") from None
    except urllib3.exceptions.HTTPError as exc:
        raise CliError(f"cannot reach the Kubernetes API: {exc}", EXIT_TARGET) from None
    try:
        tq = manifest.parse(obj)
    except manifest.ManifestError as exc:
        raise CliError(f"bad manifest: {exc}", EXIT_TARGET) from None
    if tq.spec.redis.url is not None or args.redis_url:
        return tq, tq.spec.redis.url or ""
    return tq, _secret_url(client.CoreV1Api(api), ns, tq, ApiException)


def _current_namespace(config: Any, args: argparse.Namespace) -> str | None:
    try:
        _, active = config.list_kube_config_contexts(config_file=args.kubeconfig)
    except Exception:
        return None
    ctx = (active or {}).get("context", {})
    return ctx.get("namespace") if isinstance(ctx, dict) else None


def _secret_url(core: Any, ns: str, tq: models.TaskQueue,
                api_exception: type[Exception]) -> str:
    ref = tq.spec.redis.urlSecretRef
    assert ref is not None
    try:
        secret = core.read_namespaced_secret(ref.name, ns)
    except api_exception as exc:
        raise _api_error(exc, f"Secret {ns}/{ref.name}") from None
    data = (secret.data or {}).get(ref.key)
    if data is None:
        raise CliError(f"Secret {ns}/{ref.name} has no key {ref.key!r}", EXIT_TARGET)
    url = base64.b64decode(data).decode().strip()
    _check_url(url, f"Secret {ns}/{ref.name} key {ref.key!r}")
    return url


def _api_error(exc: Any, what: str) -> CliError:
    status = getattr(exc, "status", None)
    if status == 404:
        return CliError(f"{what} not found (is the name and namespace right? "
                        "`kubectl get taskqueues -A` lists them)", EXIT_TARGET)
    if status in (401, 403):
        return CliError(f"{what}: access denied ({status}); check your kubeconfig user's RBAC",
                        EXIT_TARGET)
    reason = getattr(exc, "reason", None) or exc
    return CliError(f"{what}: Kubernetes API error {status}: {reason}", EXIT_TARGET)
