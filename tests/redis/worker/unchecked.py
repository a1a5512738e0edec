"""A worker process whose config is built by hand, past every check of the models and of the
compiled settings: `python -m tests.redis.worker.unchecked URL QUEUE,QUEUE... DEAD_LETTER HANDLER
MAX_ATTEMPTS`. It stands for a collision that reached Redis some other way (an older operator, a
hand-written config), to test what the worker itself does about it."""

from __future__ import annotations

import sys

from taskqueue.wire import keys
from taskqueue.worker.config import WorkerConfig
from tests.helpers.worker import in_process


def main(argv: list[str]) -> int:
    url, queues, dead_letter, handler, max_attempts = argv
    keys_ = queues.split(",")
    schema = keys.KeySchema(prefix=keys_[0], queues=tuple(keys.QueueRef(k) for k in keys_),
                            dead_letter=dead_letter)
    config = WorkerConfig(redis_url=url, schema=schema, worker_id="unchecked", handler=handler,
                          max_attempts=int(max_attempts), backoff_seconds=0, sweep_seconds=0.2)
    return in_process(config).run_until_signal()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
