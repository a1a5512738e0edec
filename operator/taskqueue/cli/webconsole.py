"""`taskqueue console`: the web console of a TaskQueue on this machine (docs/console.md).

The parser only: the web application (`taskqueue.console`, aiohttp and Jinja2) is imported when
the command runs, so no other command pays for it.
"""

from __future__ import annotations

import argparse

from taskqueue.cli.errors import EXIT_USAGE, CliError
from taskqueue.cli.target import Target, target_options

DEFAULT_PORT = 8470


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("console", parents=target_options(), help=help,
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--allow-actions", action="store_true",
                   help="allow requeueing and deleting dead letters from the pages")
    p.add_argument("--in-cluster", action="store_true",
                   help="every TaskQueue of the cluster, viewers sign in with a Kubernetes token "
                        "(the chart's console.enabled; --kubeconfig/--context outside a pod)")
    p.add_argument("--watch-namespace", action="append", default=[], metavar="NS",
                   help="with --in-cluster: the namespaces to show (repeatable; default: all)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="mark the session and CSRF cookies Secure (and accept https:// pages' "
                        "forms) though the console sees plain HTTP: behind a TLS-terminating "
                        "proxy or Ingress (the chart's console.secureCookies)")
    p.add_argument("--refresh", type=float, default=5.0,
                   help="seconds between refreshes of a page (default 5; all viewers share one)")
    p.set_defaults(run=run)


def run(target: Target, args: argparse.Namespace) -> int:
    if not 1.0 <= args.refresh <= 300.0:
        raise CliError("--refresh must be from 1 to 300 seconds", EXIT_USAGE)
    if not 0 <= args.port <= 65535:
        raise CliError("--port must be from 0 to 65535", EXIT_USAGE)
    from taskqueue.console import command  # aiohttp and Jinja2: only this command loads them

    if args.in_cluster:
        if target.schema is not None or args.file or args.name:
            raise CliError("--in-cluster shows every TaskQueue: drop -f, --name and --queue",
                           EXIT_USAGE)
        return command.serve_cluster(host=args.host, port=args.port, kubeconfig=args.kubeconfig,
                                     context=args.context, allow_actions=args.allow_actions,
                                     refresh=args.refresh,
                                     namespaces=tuple(args.watch_namespace),
                                     secure_cookies=args.secure_cookies)
    target.require_schema("console")
    return command.serve_local(target, host=args.host, port=args.port,
                               allow_actions=args.allow_actions, refresh=args.refresh,
                               spec_file=args.file, secure_cookies=args.secure_cookies)
