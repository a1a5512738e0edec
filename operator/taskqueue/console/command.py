"""Running the console: locally on one TaskQueue (`serve_local`), or in the cluster on every
TaskQueue behind Kubernetes tokens (`serve_cluster`, `taskqueue console --in-cluster`)."""

from __future__ import annotations

import sys

from aiohttp import web

from taskqueue.api import manifest
from taskqueue.cli.target import Target
from taskqueue.console import access, cluster, server, views
from taskqueue.console.kube import Kube
from taskqueue.console.source import LocalSource

LOCAL_REFUSAL = ("Read-only: start the console with --allow-actions to requeue or delete "
                 "dead letters.")


def local_hosted(target: Target, *, spec_file: str | None) -> views.Hosted:
    """The TaskQueue of `target` as the console shows it (its spec's targets and schedules when
    a manifest or the cluster gave it)."""
    assert target.schema is not None
    namespace, _, name = target.name.rpartition("/")
    spec = target.spec
    if spec is None and spec_file:
        spec = manifest.load(spec_file).spec
    if spec is None:
        return views.Hosted(namespace=namespace or "local", name=name, schema=target.schema,
                            target_wait={})
    return views.Hosted(namespace=namespace or "local", name=name, schema=target.schema,
                        target_wait=dict(spec.scaling.targetWaitSeconds or {}),
                        max_replicas=spec.scaling.maxReplicas, schedules=tuple(spec.schedules),
                        heartbeat_seconds=spec.worker.heartbeatSeconds)


def app_local(target: Target, *, allow_actions: bool, refresh: float,
              spec_file: str | None, secure_cookies: bool = False) -> web.Application:
    source = LocalSource(target=target, hosted=local_hosted(target, spec_file=spec_file))
    return server.build(source=source, access=access.LocalAccess(allow_actions=allow_actions),
                        refresh_seconds=refresh, refusal=LOCAL_REFUSAL,
                        mode="actions enabled" if allow_actions else "read-only",
                        secure_cookies=secure_cookies)


def serve_local(target: Target, *, host: str, port: int, allow_actions: bool, refresh: float,
                spec_file: str | None, secure_cookies: bool = False) -> int:
    app = app_local(target, allow_actions=allow_actions, refresh=refresh, spec_file=spec_file,
                    secure_cookies=secure_cookies)
    sys.stderr.write(f"taskqueue console: http://{host}:{port}/ "
                     f"({'actions enabled' if allow_actions else 'read-only'}; Ctrl-C stops)\n")
    web.run_app(app, host=host, port=port, print=None, handle_signals=True)
    return 0


CLUSTER_REFUSAL = ("Read-only for you: acting on this TaskQueue needs `update taskqueues` in its "
                   "namespace (and the console deployed with console.allowActions).")


def app_cluster(*, kubeconfig: str | None, context: str | None, allow_actions: bool,
                refresh: float, namespaces: tuple[str, ...],
                secure_cookies: bool = False) -> web.Application:
    kube = Kube(kubeconfig=kubeconfig, context=context)
    signin = cluster.ClusterAccess(kube=kube, allow_actions=allow_actions)
    return server.build(source=cluster.ClusterSource(kube=kube, namespaces=namespaces),
                        access=signin,
                        refresh_seconds=refresh, refusal=CLUSTER_REFUSAL,
                        mode="Kubernetes sign-in", signin_access=signin,
                        secure_cookies=secure_cookies)


def serve_cluster(*, host: str, port: int, kubeconfig: str | None, context: str | None,
                  allow_actions: bool, refresh: float, namespaces: tuple[str, ...],
                  secure_cookies: bool = False) -> int:
    app = app_cluster(kubeconfig=kubeconfig, context=context, allow_actions=allow_actions,
                      refresh=refresh, namespaces=namespaces, secure_cookies=secure_cookies)
    sys.stderr.write(f"taskqueue console (in the cluster): http://{host}:{port}/\n")
    web.run_app(app, host=host, port=port, print=None, handle_signals=True)
    return 0
