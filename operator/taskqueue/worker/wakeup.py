"""Idle wake-up: a RESP3 connection with `CLIENT TRACKING ON BCAST PREFIX <queue>...`.

Redis pushes an `invalidate` message naming the key on every write to a tracked key, so an idle
worker learns of an LPUSH/ZADD to one of its queues within a fraction of a millisecond, without
polling. The push only wakes the consume threads; the task itself is taken by the atomic fetch
script. Waiters also wake every `sweep` seconds (missed pushes, due retries), and everyone wakes
after the listener reconnects (writes during the outage sent no push).

Tracking is *armed* only while it is needed. A busy worker would otherwise get a push for every
fetch of every worker of the fleet (each RPOP writes a queue key), which costs Redis and the
worker CPU for nothing. So the listener turns tracking off (`CLIENT TRACKING OFF`) after
`DISARM_AFTER` pushes in a row that found no idle slot, and an idle slot turns it back on before
it sleeps. The rule that keeps a wake-up from being missed: a slot sleeps only if tracking was
confirmed on (the reply to `CLIENT TRACKING ON` was read) before its empty fetch was sent, and
stayed on; otherwise it arms and fetches again first. `token()` captures that state before the
fetch, `idle(token)` checks it after.

Only the listener thread reads or writes its connection (an SSL connection must not be used by
two threads at once): a slot asks for arming through a flag and a byte on a socket pair that
the listener polls together with the connection. The listener is a `periodic.Periodic`: each
step connects when it has no connection or handles one message; a Redis error drops the
connection and is retried with backoff (at most `RECONNECT_CAP_SECONDS` apart), anything else
ends the thread and the runner exits the worker (its one error policy).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from taskqueue.worker import resp
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.resp import pack
from taskqueue.worker.store import connect

log = logging.getLogger(__name__)

DISARM_AFTER = 32
"""Pushes in a row with no slot waiting after which tracking is turned off."""
RECONNECT_CAP_SECONDS = 2.0
"""Longest wait between two connection attempts while Redis cannot be reached."""
POLL_SECONDS = 0.5
"""Longest wait for a message in one step of the listener."""

Token = tuple[int, int]
"""(push generation, armed session) seen before a fetch."""


def tracking_prefixes(queue_keys: Iterable[str]) -> list[str]:
    """The queue keys without any that another one prefixes (Redis rejects overlapping ones)."""
    ordered = sorted(set(queue_keys))
    return [k for k in ordered if not any(k != p and k.startswith(p) for p in ordered)]


class Wakeup:
    """A generation counter bumped on every push that names one of the queue keys, and the
    armed/disarmed state of tracking on the listener connection."""

    def __init__(self, *, url: str, queue_keys: Iterable[str]) -> None:
        self._url = url
        self._keys = frozenset(queue_keys)
        prefixes = [arg for p in tracking_prefixes(self._keys) for arg in ("PREFIX", p)]
        self._on_cmd = pack(["CLIENT", "TRACKING", "ON", "BCAST", *prefixes])
        self._off_cmd = pack(["CLIENT", "TRACKING", "OFF"])
        self.cond = threading.Condition()
        """Notified on every push, arming and stop; the dispatcher waits on it for its slots
        too (`idle(until=...)`), so one wait covers both."""
        self._gen = 0
        self._stopped = False
        self._conn: resp.Connection | None = None
        self._sessions = 0
        self._armed = 0
        """Session number while tracking is confirmed on, 0 while it is off or unknown."""
        self._arming = False
        self._want_arm = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._pending: deque[str] = deque()
        """Replies we wait for on the listener connection, in order: "on" / "off"."""
        self._waiters = 0
        self._idle_pushes = 0
        self.arms = 0
        self.disarms = 0
        self._halt = threading.Event()
        self.loop = Periodic(name="wakeup", what="listening", step=self._step, stop=self._halt,
                             cap=RECONNECT_CAP_SECONDS, close=self._close)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        with self.cond:
            self._stopped = True
            self.cond.notify_all()
        self._halt.set()
        self._poke()

    def _poke(self) -> None:
        """Wake the listener out of its poll."""
        # OSError: the pair's buffer is full (wake-ups are pending anyway) or it is closed
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def generation(self) -> int:
        return self._gen

    @property
    def armed(self) -> bool:
        return bool(self._armed)

    def bump(self) -> None:
        with self.cond:
            self._gen += 1
            self.cond.notify_all()

    def token(self) -> Token:
        """Call before a fetch; pass to `idle()` if the fetch found nothing."""
        return self._gen, self._armed

    def idle(self, token: Token, *, timeout: float,
             until: Callable[[], bool] = lambda: False) -> None:
        """After an empty fetch: sleep until a push after `token`, stop(), `until()` (checked
        whenever `cond` is notified) or `timeout`, if tracking was armed before that fetch and
        still is. Otherwise arm it (waiting up to `timeout` for the confirmation) and return at
        once, so the caller fetches again."""
        gen, session = token
        with self.cond:
            if session and self._armed == session:
                self._waiters += 1
                try:
                    self.cond.wait_for(
                        lambda: self._gen != gen or self._stopped or until(), timeout)
                finally:
                    self._waiters -= 1
                return
            self._arm()
            self.cond.wait_for(lambda: self._armed or self._stopped or until(), timeout)

    def wait(self, since: int, *, timeout: float) -> None:
        """Until a push after generation `since`, stop(), or `timeout` seconds."""
        with self.cond:
            self.cond.wait_for(lambda: self._gen != since or self._stopped, timeout)

    # -- under self.cond -------------------------------------------------------------------
    def _arm(self) -> None:
        """Ask the listener to turn tracking on."""
        if self._armed or self._arming or self._want_arm or self._stopped:
            return
        self._want_arm = True
        self._poke()

    # -- listener thread --------------------------------------------------------------------
    def _step(self) -> float:
        """Connect when not connected, else handle one message (or wait up to POLL_SECONDS
        for one); a failure drops the connection (`Periodic` retries with backoff)."""
        conn = self._conn
        if conn is None:
            self._open()
            return 0.0
        try:
            self._maybe_send_arm(conn)
            if conn.buffered() or self._poll(conn, timeout=POLL_SECONDS):
                msg = conn.read()
                if isinstance(msg, list):
                    self._on_push(conn, msg)
                else:
                    self._on_reply()
        except BaseException:
            self._drop()
            raise
        return 0.0

    def _open(self) -> None:
        """A new connection with tracking on; everyone wakes (writes while we were not
        listening sent no push)."""
        conn = connect(self._url, key=min(self._keys), protocol=3)
        try:
            conn.send(self._on_cmd)
            conn.read()
        except BaseException:
            conn.close()
            raise
        with self.cond:
            self._conn = conn
            self._pending.clear()
            self._arming = False
            self._want_arm = False
            self._sessions += 1
            self._armed = self._sessions
            self._idle_pushes = 0
            self._gen += 1
            self.cond.notify_all()

    def _drop(self) -> None:
        """Forget the connection: tracking is off until the next one."""
        with self.cond:
            conn, self._conn = self._conn, None
            self._armed = 0
            self._arming = False
            self._want_arm = False
            self._pending.clear()
            self.cond.notify_all()
        if conn is not None:
            conn.close()

    def _close(self) -> None:
        """The listener thread ends, however it ends."""
        self._drop()
        self._wake_r.close()
        self._wake_w.close()

    def _poll(self, conn: resp.Connection, *, timeout: float) -> bool:
        """Wait until the connection is readable (True) or a slot pokes us / timeout (False)."""
        sock = conn.sock
        if sock is None:
            raise ConnectionError("wake-up connection closed")
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        ready = {fd for fd, _ in poller.poll(timeout * 1000)}
        if self._wake_r.fileno() in ready:
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
        return sock.fileno() in ready

    def _maybe_send_arm(self, conn: resp.Connection) -> None:
        with self.cond:
            if not self._want_arm:
                return
            self._want_arm = False
            if self._armed or self._arming or self._stopped:
                return
            self._send(conn, self._on_cmd, "on")
            self._arming = True
            self.arms += 1

    def _send(self, conn: resp.Connection, packed: bytes, reply: str) -> None:
        """Under self.cond, from the listener thread only."""
        conn.send(packed)
        self._pending.append(reply)

    def _on_reply(self) -> None:
        with self.cond:
            what = self._pending.popleft() if self._pending else ""
            if what == "on":
                self._arming = False
                self._sessions += 1
                self._armed = self._sessions
                self._idle_pushes = 0
                self.cond.notify_all()

    def _on_push(self, conn: resp.Connection, msg: list[Any]) -> None:
        if len(msg) < 2 or msg[0] != "invalidate":
            return
        touched = msg[1]
        with self.cond:
            if touched is None or any(k in self._keys for k in touched):
                self._gen += 1
                self.cond.notify_all()
            if self._waiters:
                self._idle_pushes = 0
            elif self._armed:
                self._idle_pushes += 1
                if self._idle_pushes >= DISARM_AFTER:
                    self._send(conn, self._off_cmd, "off")
                    self._armed = 0
                    self.disarms += 1
