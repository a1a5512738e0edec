"""Push tasks for examples/vip-normal.yaml: `python examples/producer.py [REDIS_URL]`.

The same from a shell (any language works: a task is a string LPUSHed onto the queue's list):

    redis-cli -u redis://localhost:6379/0 LPUSH emails:vip '{"to": "ceo@example.com"}'
    redis-cli -u redis://localhost:6379/0 LPUSH emails:normal '{"to": "ann@example.com"}'

`taskqueue.client.enqueue_sync` wraps the payload in an envelope with a task id and the enqueue
time, so `kubectl get taskqueue` can report the oldest task's age; raw LPUSH payloads work too.
"""

from __future__ import annotations

import json
import sys

from taskqueue.client import connect, enqueue_many_sync, enqueue_sync


def main(url: str = "redis://localhost:6379/0") -> None:
    client = connect(url)  # each push sent once: no automatic re-send after a timeout
    vip = enqueue_sync(client, "emails:vip", json.dumps({"to": "ceo@example.com"}))
    normal = enqueue_many_sync(
        client, "emails:normal", [json.dumps({"to": f"user{i}@example.com"}) for i in range(100)]
    )
    print(f"queued vip task {vip} and {len(normal)} normal tasks")


if __name__ == "__main__":
    main(*sys.argv[1:2])
