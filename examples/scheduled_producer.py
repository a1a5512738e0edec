"""Scheduled, unique and idempotent tasks for examples/idempotent-scheduled.yaml:
`python examples/scheduled_producer.py [REDIS_URL]`.

- `delay=` / `at=`: the task waits in the TaskQueue's delayed zset (`payments:delayed`, the
  prefix being the first queue key) and the workers start it within a second of its due time.
- `task_id=`: a business id; with `spec.worker.idempotency` a completed id is never run again
  within the window, however often it is delivered.
- `unique_for=`: a second enqueue of the same id within the window is a no-op (one script).

The same from a shell (any language; the entry is "<queue key>\\n<score>\\n<payload>", score
empty for a list queue, scored by the due time in unix milliseconds):

    redis-cli -u redis://localhost:6379/0 ZADD payments:delayed \\
        $(( ($(date +%s) + 30) * 1000 )) "$(printf 'payments\\n\\n{"order": 7}')"
    taskqueue enqueue -f examples/idempotent-scheduled.yaml payments --in 30s '{"order": 7}'
    taskqueue enqueue -f examples/idempotent-scheduled.yaml payments \\
        --at 2026-12-24T09:00:00Z --unique-for 1d --id reminder-7 '{"order": 7}'
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

from taskqueue.client import connect, enqueue_sync


def main(url: str = "redis://localhost:6379/0") -> None:
    client = connect(url)  # each push sent once: no automatic re-send after a timeout
    charge = enqueue_sync(client, "payments", json.dumps({"order": 41}), task_id="order-41")
    later = enqueue_sync(client, "payments", json.dumps({"order": 42}), task_id="order-42",
                         delay=timedelta(seconds=30))
    tomorrow = datetime.now(UTC).replace(hour=9, minute=0, second=0) + timedelta(days=1)
    reminders = {enqueue_sync(client, "payments", json.dumps({"remind": 41}),
                              task_id="reminder-41", at=tomorrow, unique_for=86400)
                 for _ in range(3)}  # three calls, one task
    print(f"queued {charge}; {later} due in 30 s; {reminders} due {tomorrow:%Y-%m-%d %H:%M}Z")


if __name__ == "__main__":
    main(*sys.argv[1:2])
