"""The console's one door to the Kubernetes API (in the cluster): the TaskQueues it lists, the
Secrets holding their Redis URLs, and the reviews of a viewer's token (TokenReview) and of what
that viewer may do in a namespace (SubjectAccessReview). Synchronous calls of the Kubernetes
client, run by the caller in a thread.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from kubernetes import client as _client
from kubernetes import config as _config

from taskqueue.api import models

client: Any = _client
config: Any = _config


@dataclass(frozen=True)
class User:
    """Who a token belongs to, as the TokenReview said."""

    name: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]


class Kube:
    def __init__(self, *, kubeconfig: str | None, context: str | None) -> None:
        if kubeconfig is None and context is None:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
        else:
            config.load_kube_config(config_file=kubeconfig, context=context)
        api = client.ApiClient()
        self._objects = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._authn = client.AuthenticationV1Api(api)
        self._authz = client.AuthorizationV1Api(api)

    def taskqueues(self, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
        """The TaskQueues of `namespaces`, or of the whole cluster when empty (the console's own
        `list taskqueues`)."""
        if not namespaces:
            reply = self._objects.list_cluster_custom_object(models.GROUP, models.VERSION,
                                                             models.PLURAL)
            return list(reply.get("items", []))
        items: list[dict[str, Any]] = []
        for ns in namespaces:
            items.extend(self._objects.list_namespaced_custom_object(
                models.GROUP, models.VERSION, ns, models.PLURAL).get("items", []))
        return items

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        secret = self._core.read_namespaced_secret(name, namespace)
        data = (secret.data or {}).get(key)
        return None if data is None else base64.b64decode(data).decode().strip()

    def review(self, token: str) -> User | None:
        """The user of `token`, None when the API server does not authenticate it."""
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        status = self._authn.create_token_review(body).status
        if status is None or not status.authenticated or status.user is None:
            return None
        u = status.user
        return User(name=u.username or "", uid=u.uid or "", groups=tuple(u.groups or ()),
                    extra={k: list(v) for k, v in (u.extra or {}).items()})

    def allowed(self, user: User, *, verb: str, namespace: str) -> bool:
        """Whether `user` may `verb` taskqueues in `namespace` (a SubjectAccessReview)."""
        body = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user.name, uid=user.uid or None, groups=list(user.groups) or None,
            extra=user.extra or None,
            resource_attributes=client.V1ResourceAttributes(
                group=models.GROUP, resource=models.PLURAL, verb=verb, namespace=namespace)))
        status = self._authz.create_subject_access_review(body).status
        return bool(status is not None and status.allowed)
