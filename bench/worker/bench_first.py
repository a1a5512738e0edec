"""The launch-to-first-task handler: records when the task "first" started, over a raw socket.

Kept apart from bench_tasks.py (which imports redis-py for its other handlers) so that the start
measured is the worker's own: a handler module that imports redis-py would add its import time
(~150 ms here) to a worker that does not otherwise load it.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.parse


def stamp(payload: str) -> None:
    """SET bench:first <unix time> when the payload is "first" (BENCH_REDIS_URL, no auth)."""
    if payload != "first":
        return
    url = urllib.parse.urlsplit(os.environ["BENCH_REDIS_URL"])
    value = f"{time.time():.6f}".encode()
    command = b"*3\r\n$3\r\nSET\r\n$11\r\nbench:first\r\n$%d\r\n%s\r\n" % (len(value), value)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379)) as sock:
        sock.sendall(command)
        if not sock.recv(64).startswith(b"+OK"):
            raise RuntimeError("SET bench:first failed")
