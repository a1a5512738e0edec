"""The console in the cluster against the real API server: viewers sign in with a ServiceAccount
token (TokenRequest, as `kubectl create token`), the TokenReview names them, and a
SubjectAccessReview per namespace decides what they see (`get taskqueues`) and whether they may
act (`update taskqueues`)."""

from __future__ import annotations

import http.client
import json
import re
from urllib.parse import urlencode, urlsplit

import redis

from taskqueue.console import cluster, security
from taskqueue_devcluster import ControlPlane
from tests.cluster.console.conftest import Viewers
from tests.helpers.browser import Browser, console_process


def test_tokens_see_only_the_namespaces_they_may_get_and_act_only_where_they_may_update(
        control_plane: ControlPlane, viewers: Viewers, redis_sync: redis.Redis) -> None:
    ns_a, ns_b, reader, actor = viewers.ns_a, viewers.ns_b, viewers.reader, viewers.actor
    with console_process("--in-cluster", "--kubeconfig", str(control_plane.kubeconfig),
                         "--allow-actions") as base:
        anonymous = Browser(base)
        status, page = anonymous.get("/")
        assert "Sign in with a Kubernetes token" in page  # redirected to the sign-in page
        assert anonymous.post("/signin", {"token": "not-a-token"})[0] == 401

        r = Browser(base)
        assert r.post("/signin", {"token": reader})[0] == 200
        status, page = r.get("/")
        assert f"{ns_a}/thumbs" in page and ns_b not in page
        # the list's live refresh: the same SubjectAccessReview, the same rows
        status, body = r.get("/data.json")
        table = json.loads(body)["parts"]["taskqueues"]
        assert status == 200 and f'data-tq="{ns_a}/thumbs"' in table and ns_b not in table
        status, body = anonymous.get("/data.json")
        assert "Sign in with a Kubernetes token" in body and ns_a not in body
        assert r.get(f"/tq/{ns_b}/thumbs")[0] == 404  # the other namespace: as if absent
        assert r.get(f"/tq/{ns_b}/thumbs/dead")[0] == 404
        status, page = r.get(f"/tq/{ns_a}/thumbs/dead")
        assert status == 200 and "needs `update taskqueues`" in page
        assert 'class="requeue"' not in page
        digest = re.search(r'data-digest="([0-9a-f]{40})"', page)
        assert digest is not None
        status, _ = r.post(f"/tq/{ns_a}/thumbs/dead/act",
                           {"action": "delete", "digests": digest.group(1)})
        assert status == 403
        assert redis_sync.llen("a-q:dead") == 1

        a = Browser(base)
        assert a.post("/signin", {"token": actor})[0] == 200
        status, page = a.get(f"/tq/{ns_a}/thumbs/dead")
        assert 'class="requeue"' in page
        status, page = a.post(f"/tq/{ns_a}/thumbs/dead/act",
                              {"action": "requeue", "digests": digest.group(1)})
        assert status == 200 and "requeued 1 record(s)" in page
        assert redis_sync.llen("a-q:dead") == 0 and redis_sync.llen("a-q") == 1
        assert a.get(f"/tq/{ns_b}/thumbs")[0] == 404
        assert redis_sync.llen("b-q:dead") == 1


def _request(base: str, method: str, path: str, *, cookies: dict[str, str],
             origin: str | None = None,
             form: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """One plain HTTP request, cookies sent as given (a cookie jar would keep Secure cookies
    off plain HTTP): (status, its Set-Cookie headers, body)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
    if origin:
        headers["Origin"] = origin
    if form is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, path, body=None if form is None else urlencode(form),
                     headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.msg.get_all("Set-Cookie") or [], reply.read().decode()
    finally:
        conn.close()


def _cookie(set_cookies: list[str], name: str) -> tuple[str, set[str]]:
    """The value of cookie `name` and its attributes, lowercased (`secure`, `httponly`, ...)."""
    for header in set_cookies:
        first, *attrs = (part.strip() for part in header.split(";"))
        key, _, value = first.partition("=")
        if key == name:
            return value, {a.lower() for a in attrs}
    raise AssertionError(f"no {name} cookie in {set_cookies}")


def test_secure_cookies_behind_a_tls_terminating_ingress(
        control_plane: ControlPlane, viewers: Viewers) -> None:
    """The console sees plain HTTP, as behind an Ingress terminating TLS. With --secure-cookies
    (the chart's console.secureCookies) its CSRF and session cookies are Secure, HttpOnly and
    SameSite=Strict, and the sign-in form posted from the https:// page of its host is accepted
    (and still from the http:// one of a port-forward); without it neither cookie is Secure and
    an https:// origin is refused."""
    for secure in (True, False):
        with console_process("--in-cluster", "--kubeconfig", str(control_plane.kubeconfig),
                             *(["--secure-cookies"] if secure else [])) as base:
            ingress = "https://" + urlsplit(base).netloc
            status, set_cookies, page = _request(base, "GET", "/signin", cookies={})
            csrf, attrs = _cookie(set_cookies, security.CSRF_COOKIE)
            assert status == 200 and ("secure" in attrs) is secure
            assert {"httponly", "samesite=strict"} <= attrs
            assert f'name="csrf" value="{csrf}"' in page
            jar = {security.CSRF_COOKIE: csrf}
            form = {"csrf": csrf, "token": viewers.reader}
            status, set_cookies, _ = _request(base, "POST", "/signin", cookies=jar,
                                              origin=ingress, form=form)
            if not secure:
                assert status == 403  # an https:// page is not this plain-HTTP console's
                status, set_cookies, _ = _request(base, "POST", "/signin", cookies=jar,
                                                  origin=base, form=form)
                assert status == 303
                assert "secure" not in _cookie(set_cookies, cluster.SESSION_COOKIE)[1]
                continue
            assert status == 303
            sid, attrs = _cookie(set_cookies, cluster.SESSION_COOKIE)
            assert {"secure", "httponly", "samesite=strict"} <= attrs
            status, _, page = _request(base, "GET", "/", cookies={cluster.SESSION_COOKIE: sid})
            assert status == 200
            assert f"{viewers.ns_a}/thumbs" in page and viewers.ns_b not in page
            status, _, _ = _request(base, "POST", "/signin", cookies=jar, origin=base,
                                    form=form)
            assert status == 303  # the http:// page of a port-forward
