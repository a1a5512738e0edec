"""The console's browser tests: one Chromium per test module (a fresh profile), a page per test
that records every dialog (an escaped payload must never open one).

Per module, not per session: Playwright's sync API keeps its event loop running in the test
process while it is open, and a later test of another module that calls `asyncio.run` (the
CLI's) in the same process would fail ("cannot be called from a running event loop")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import ARGS, chromium_path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.fail("chromium is not installed: scripts/setup installs it (apt-get install "
                    "chromium)")
    from playwright.sync_api import sync_playwright

    profile: Path = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=path, args=ARGS, headless=True,
            viewport={"width": 1400, "height": 900})
        yield context
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    yield page
    page.close()
    browser.clear_cookies()
