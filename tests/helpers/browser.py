"""A real Chromium (Debian's `chromium`) driven by Playwright, and a `taskqueue console` process
for it to look at. Playwright's own browser download is not used: `executable_path` is the
system Chromium."""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(os.environ.get("TASKQUEUE_SCREENSHOTS")
                   or Path(tempfile.gettempdir()) / "taskqueue-screenshots")
SCREENSHOTS.mkdir(parents=True, exist_ok=True)
"""Where the tests save their screenshots: a temporary folder, so that a test run leaves the
checkout as it was; `TASKQUEUE_SCREENSHOTS=docs/images` refreshes the ones docs/console.md
shows."""


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def console_process(*args: str, timeout: float = 60.0) -> Iterator[str]:
    """`taskqueue console ARGS` on a free loopback port; yields its base URL; stopped after."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "taskqueue.cli.console", "console", *args,
                             "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise AssertionError(f"taskqueue console exited {proc.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("taskqueue console did not listen") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Browser:
    """A cookie-keeping HTTP client that posts forms as a page of the console would."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with self.opener.open(self.base + path, timeout=30) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def post(self, path: str, form: dict[str, str]) -> tuple[int, str]:
        page = self.get("/signin" if path == "/signin" else path.rsplit("/", 1)[0])[1]
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        data = urllib.parse.urlencode({**form, "csrf": token.group(1) if token else ""})
        request = urllib.request.Request(self.base + path, data=data.encode(),
                                         headers={"Origin": self.base})
        try:
            with self.opener.open(request, timeout=30) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
