"""The TaskQueue manifest the topology tests run (keys share the hash tag `{emails}`) and the
type of the `start_worker` fixture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskqueue.api import redact
from taskqueue.worker.runner import Worker

StartWorker = Callable[..., Worker]


def taskqueue(url: str, **spec: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"redis": {"url": url},
                            "queues": [{"key": "{emails}:vip"}, {"key": "{emails}:normal"}]}
    data.update(spec)
    if redact.has_password(data["redis"].get("url") or ""):
        # a password never goes in the spec (the CRD refuses it): the URL is in a Secret, which
        # callers hand over as a Secret would be (RedisUrls, TASKQUEUE_REDIS_URL, --redis-url)
        data["redis"] = {**{k: v for k, v in data["redis"].items() if k != "url"},
                         "urlSecretRef": {"name": "redis", "key": "url"}}
    return {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "emails", "namespace": "mail"}, "spec": data}
