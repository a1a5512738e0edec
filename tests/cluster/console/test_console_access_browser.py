"""Kubernetes-native access to the console in a real Chromium, on the real API server: a viewer
signs in through the page's form with a ServiceAccount token (TokenRequest, as `kubectl create
token`); a token without `get taskqueues` in a namespace sees nothing of it, one without
`update` has no action and its forged POST is refused, one with `update` requeues by clicking.
Screenshot: docs/images/console-signin.png.
"""

from __future__ import annotations

from typing import Any

import redis

from taskqueue_devcluster import ControlPlane
from tests.cluster.console.conftest import Viewers
from tests.helpers.browser import SCREENSHOTS, console_process


def sign_in(page: Any, base: str, token: str) -> None:
    page.goto(base + "/")
    assert page.url == base + "/signin"  # nobody signed in: the sign-in page
    page.locator("textarea[name=token]").fill(token)
    page.locator("#signin").click()
    page.wait_for_load_state("load")


def test_what_a_token_may_see_and_do_in_the_browser(
        page: Any, control_plane: ControlPlane, viewers: Viewers,
        redis_sync: redis.Redis) -> None:
    ns_a, ns_b, reader, actor = viewers.ns_a, viewers.ns_b, viewers.reader, viewers.actor
    with console_process("--in-cluster", "--kubeconfig", str(control_plane.kubeconfig),
                         "--allow-actions") as base:
        page.goto(base + "/signin")
        page.screenshot(path=str(SCREENSHOTS / "console-signin.png"))
        sign_in(page, base, "not-a-token")
        assert page.locator("#signin-failed").is_visible()

        sign_in(page, base, reader)
        rows = page.locator("#taskqueues tr[data-tq]")
        assert [rows.nth(i).get_attribute("data-tq") for i in range(rows.count())] == [
            f"{ns_a}/thumbs"]  # not the namespace it may not get
        assert page.goto(base + f"/tq/{ns_b}/thumbs").status == 404
        assert page.goto(base + f"/tq/{ns_b}/thumbs/dead").status == 404
        page.goto(base + f"/tq/{ns_a}/thumbs/dead")
        assert page.locator("button.requeue").count() == 0
        assert "needs `update taskqueues`" in page.locator("main").inner_text()
        digest = page.locator("tr[data-digest]").first.get_attribute("data-digest")
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "tq_csrf")
        forged = page.request.post(base + f"/tq/{ns_a}/thumbs/dead/act",
                                   headers={"Origin": base},
                                   form={"csrf": csrf, "action": "delete", "digests": digest})
        assert forged.status == 403 and redis_sync.llen("a-q:dead") == 1
        page.locator("button", has_text="sign out").click()
        page.wait_for_load_state("load")

        sign_in(page, base, actor)
        page.goto(base + f"/tq/{ns_a}/thumbs/dead")
        page.locator("tr[data-digest]", has_text="a-q").locator("button.requeue").click()
        page.locator("#confirm").click()
        assert page.locator("#result").inner_text() == "requeued 1 record(s)"
        assert redis_sync.llen("a-q:dead") == 0 and redis_sync.llen("a-q") == 1
        assert page.goto(base + f"/tq/{ns_b}/thumbs").status == 404
        assert redis_sync.llen("b-q:dead") == 1
