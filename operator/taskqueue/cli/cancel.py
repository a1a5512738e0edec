"""`taskqueue cancel ID`: cancel one task by its envelope id (cancel.lua). A queued or delayed
task is never run; a running one is stopped by its worker within a second (a sync handler sees
`ctx.cancelled`, a coroutine is cancelled, a command gets SIGTERM then SIGKILL); never retried,
counted in the stats' `cancelled`. Exit 1 when the task had already finished (done, dead or
cancelled): nothing to cancel.
"""

from __future__ import annotations

import argparse
import json

from taskqueue import client
from taskqueue.cli.target import Target, target_options


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("cancel", parents=target_options(), help=help, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("id", help="the task id (what enqueue printed)")
    p.add_argument("--json", action="store_true", help="the result as one JSON object")
    p.set_defaults(run=run)


def run(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("cancel")
    r = client.cancel_sync(target.connect(), args.id, key_prefix=schema.prefix)
    if args.json:
        print(json.dumps(r.__dict__))
    elif r.recorded:
        where = f" (it was {r.state})" if r.state else ""
        print(f"cancelled {r.id}{where}: a queued or delayed task will not run; "
              f"{r.workers_told} worker(s) told, a running one stops within a second")
    else:
        print(f"{r.id} is {r.state} already: nothing to cancel")
    return 0 if r.recorded else 1
