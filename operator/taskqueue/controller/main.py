"""`taskqueue-operator`: a thin wrapper over kopf's runner, with Lease leader election.

    taskqueue-operator [--namespace NS ... | --all-namespaces] [--metrics-port 9090]
        [--metrics-address 0.0.0.0] [--health-port 8080] [--health-address 0.0.0.0]
        [--leader-election-namespace NS] [--leader-election-id ID]
        [--no-leader-election | --sharding [--shard-lease-seconds 15] [--shard-renew-seconds 3]]
        [--kubeconfig PATH] [--log-format json|text]

Runs the same on a laptop (kubeconfig) and in a pod (service account; POD_NAME/POD_NAMESPACE).
While waiting for the Lease the process serves /healthz itself; once leader it runs kopf
(standalone: no peering) with kopf's liveness endpoint on the same port. Losing the Lease stops
kopf and exits 1, so the pod restarts as a candidate. With --sharding there is no leader: every
replica runs kopf and acts on its share of the TaskQueues (`taskqueue.controller.shards`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import kopf
from aiohttp import web

from taskqueue.controller import admission, handlers, kube
from taskqueue.controller.leader import LeaderElector
from taskqueue.controller.poller import Poller
from taskqueue.controller.redisurls import RedisPools
from taskqueue.controller.shards import Shards
from taskqueue.telemetry import logfmt, metrics

assert handlers  # registers the kopf handlers
log = logging.getLogger("taskqueue.operator")
Flag = asyncio.Event | threading.Event


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="taskqueue-operator", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", default=[],
                       help="watch this namespace (repeatable)")
    scope.add_argument("--all-namespaces", "-A", action="store_true",
                       help="watch all namespaces (the default when no --namespace is given)")
    p.add_argument("--metrics-port", type=int, default=9090, help="/metrics port (0: off)")
    p.add_argument("--metrics-address", default="0.0.0.0",
                   help="address /metrics listens on (default 0.0.0.0: every interface; "
                        "127.0.0.1 for a scraping sidecar only)")
    p.add_argument("--health-port", type=int, default=8080, help="/healthz port (0: off)")
    p.add_argument("--health-address", default="0.0.0.0",
                   help="address /healthz listens on (the kubelet's probes need the pod IP)")
    p.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE"),
                   help="namespace of the Lease (default: $POD_NAMESPACE, else 'default')")
    p.add_argument("--leader-election-id", default="taskqueue-operator", help="Lease name")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--no-leader-election", action="store_true",
                      help="act without a Lease (one replica only)")
    mode.add_argument("--sharding", action="store_true",
                      help="share the TaskQueues with the other replicas run with --sharding and "
                           "the same --leader-election-id (a Lease each), instead of electing one")
    p.add_argument("--shard-lease-seconds", type=float, default=15.0,
                   help="duration of each replica's shard Lease (default 15)")
    p.add_argument("--shard-renew-seconds", type=float, default=3.0,
                   help="renew and list the shard Leases this often; under half the duration "
                        "(default 3; the handover margin is twice this)")
    p.add_argument("--allowed-image-prefix", action="append", default=[], metavar="PREFIX",
                   help="worker images must start with one of these (repeatable; default: any)")
    p.add_argument("--scale-target-label", default=None, metavar="KEY=VALUE",
                   help="a Deployment named by spec.scaleTargetRef must carry this label "
                        "(default: any Deployment of the namespace)")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig path (default: in-cluster, then $KUBECONFIG/~/.kube/config)")
    p.add_argument("--log-format", choices=("json", "text"), default="json")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    try:
        args.worker_rules = admission.WorkerRules(
            image_prefixes=tuple(args.allowed_image_prefix),
            scale_target_label=(admission.parse_label(args.scale_target_label)
                                if args.scale_target_label else None))
    except ValueError as e:
        p.error(str(e))
    if args.sharding and not 0 < 2 * args.shard_renew_seconds < args.shard_lease_seconds:
        p.error(f"--shard-renew-seconds {args.shard_renew_seconds}: must be above 0 and under "
                f"half of --shard-lease-seconds ({args.shard_lease_seconds})")
    return args


def setup_logging(fmt: str, level: str) -> None:
    logfmt.setup(json_lines=fmt == "json", level=level, quiet=("kubernetes",))


async def _standby_health(port: int, address: str) -> web.AppRunner | None:
    """/healthz while waiting for the Lease (kopf's own endpoint takes over once leader)."""
    if not port:
        return None
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"leader": False})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, address, port, reuse_address=True).start()
    return runner


def _identity() -> str:
    """POD_NAME (or the host name) plus a random suffix, as client-go does: unique per run."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _pod() -> str:
    """This replica's name in its shard Lease's: POD_NAME, else host name and process id."""
    return (os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}").lower()


def _shards(args: argparse.Namespace, client: kube.KubeClient, poller: Poller) -> Shards | None:
    if not args.sharding:
        return None
    return Shards(client.api, args.leader_election_namespace or "default",
                  args.leader_election_id, pod=_pod(), identity=_identity(),
                  records=poller.records, lease_seconds=args.shard_lease_seconds,
                  renew_seconds=args.shard_renew_seconds)


async def _wait(flag: Flag | None) -> None:
    if flag is None:
        await asyncio.Event().wait()
    elif isinstance(flag, asyncio.Event):
        await flag.wait()
    else:
        await asyncio.to_thread(flag.wait)


async def run(args: argparse.Namespace, *, stop_flag: Flag | None = None,
              ready_flag: threading.Event | None = None) -> int:
    """Run until `stop_flag` is set (0) or leadership is lost (1)."""
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(kube.API_THREADS, thread_name_prefix="kube"))
    client = kube.KubeClient(args.kubeconfig)
    poller = Poller(kube=client, pools=RedisPools(), rules=args.worker_rules)
    shards = _shards(args, client, poller)
    poller.shard = shards.identity if shards is not None else None
    elector = None if args.no_leader_election or shards else LeaderElector(
        client.api, args.leader_election_namespace or "default", args.leader_election_id,
        _identity())
    standby = await _standby_health(args.health_port, args.health_address)
    stopping = asyncio.create_task(_wait(stop_flag))
    try:
        if elector is not None:
            acquiring = asyncio.create_task(elector.acquire())
            await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not acquiring.done():
                acquiring.cancel()
                return 0
        if shards is not None:
            await shards.join()
        if standby is not None:
            await standby.cleanup()
            standby = None
        return await _lead(args, poller, elector, shards, stopping, ready_flag)
    finally:
        stopping.cancel()
        if shards is not None:
            await asyncio.to_thread(shards.leave)
        if standby is not None:
            await standby.cleanup()
        if elector is not None:
            await asyncio.to_thread(elector.release)
        await poller.pools.close()
        client.close()


async def _lead(args: argparse.Namespace, poller: Poller, elector: LeaderElector | None,
                shards: Shards | None, stopping: asyncio.Task[None],
                ready_flag: threading.Event | None) -> int:
    kopf_stop: asyncio.Event = asyncio.Event()
    host = f"[{args.health_address}]" if ":" in args.health_address else args.health_address
    health = f"http://{host}:{args.health_port}/healthz" if args.health_port else None
    operator = asyncio.create_task(kopf.operator(
        standalone=True, clusterwide=not args.namespace, namespaces=args.namespace,
        liveness_endpoint=health, stop_flag=kopf_stop, ready_flag=ready_flag,
        memo=kopf.Memo(poller=poller, kubeconfig=args.kubeconfig, shards=shards),
    ))
    holding = asyncio.create_task(elector.hold() if elector else shards.hold() if shards
                                  else asyncio.Event().wait())
    done, _ = await asyncio.wait({operator, holding, stopping},
                                 return_when=asyncio.FIRST_COMPLETED)
    kopf_stop.set()
    holding.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await operator
    if holding in done:
        log.error("leadership lost: exiting so that a new candidate takes over")
        return 1
    if operator in done and stopping not in done:
        # In the main thread kopf installs its own SIGTERM/SIGINT handlers (replacing ours) and
        # stops cleanly on them: a clean stop is the pod being terminated, a crash is an error.
        if operator.cancelled() or operator.exception() is not None:
            log.error("kopf stopped on its own")
            return 1
        log.info("kopf stopped on a termination signal")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_format, args.log_level)
    if args.metrics_port:
        metrics.serve(metrics.OPERATOR, port=args.metrics_port, addr=args.metrics_address)
    log.info("taskqueue-operator starting: %s", "all namespaces" if not args.namespace
             else ", ".join(args.namespace))
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await run(args, stop_flag=stop)


if __name__ == "__main__":
    raise SystemExit(main())
