"""A loopback port that accepts every connection and closes it at once, counting them: a Redis
that never answers, to count how many times a client tries to reach it."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class HangUp:
    port: int
    accepted: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def hanging_up() -> Iterator[HangUp]:
    """A `HangUp` listening until the block ends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.1)
    hang_up = HangUp(port=int(server.getsockname()[1]))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with hang_up.lock:
                hang_up.accepted += 1
            conn.close()

    thread = threading.Thread(target=serve, name="hang-up", daemon=True)
    thread.start()
    try:
        yield hang_up
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()
