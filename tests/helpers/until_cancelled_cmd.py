"""A command handler for tests: notes its start, then runs a minute unless its payload is
"quick", then records the payload (the worker's TASKQUEUE_* environment, the test's Redis)."""

import os
import sys
import time

import redis

r = redis.Redis.from_url(os.environ["TASKQUEUE_TEST_REDIS_URL"])
payload = sys.stdin.read()
r.rpush("test:started", os.environ["TASKQUEUE_TASK_ID"])
if payload != "quick":
    time.sleep(60)
r.rpush("test:done", payload)
