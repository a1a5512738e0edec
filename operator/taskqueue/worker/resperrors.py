"""The errors of the worker's Redis connection (`taskqueue.worker.resp`), by reply code.

An error reply raises `ReplyError`, or the subclass its code names (NOSCRIPT, NOPERM, READONLY,
MOVED/ASK, CLUSTERDOWN, TRYAGAIN). A connection that breaks, is refused, or cannot serve yet
(LOADING, a refused password, too many clients) raises `ConnectionLostError`, an OSError like
the `TimeoutError` of a late reply: after either the connection is unusable. A reply the caller
cannot read (`UnexpectedReplyError`) is raised by the caller that parses it.
"""

from __future__ import annotations


class RedisError(Exception):
    """What a Redis call fails with, besides OSError (connection loss, timeouts)."""


class ReplyError(RedisError):
    """An error reply (WRONGTYPE, OOM, BUSY, MISCONF...); the message starts with its code."""

    @property
    def code(self) -> str:
        return str(self).split(" ", 1)[0]


class NoScriptError(ReplyError):
    """NOSCRIPT: the server does not have the script (restarted, failed over): load it."""


class NoPermissionError(ReplyError):
    """NOPERM: the ACL refused a command; the message names it."""


class ReadOnlyError(ReplyError):
    """READONLY: the node was demoted; find the master again."""


class MovedError(ReplyError):
    """MOVED / ASK: the key's slot is served elsewhere; find the master again."""


class ClusterDownError(ReplyError):
    """CLUSTERDOWN: the cluster cannot serve the slot now."""


class TryAgainError(ReplyError):
    """TRYAGAIN: a slot migration is under way."""


class UnexpectedReplyError(RedisError):
    """A reply of another shape than the command or script gives (a proxy in the way, a key
    another program wrote): the call failed, the connection is still usable."""


class ConnectionLostError(ConnectionError):
    """The connection broke or was refused, or the server cannot serve it (yet)."""


class ProtocolError(ConnectionLostError):
    """What came back is not RESP: the connection cannot be trusted any more."""


_BY_CODE: dict[str, type[ReplyError]] = {
    "NOSCRIPT": NoScriptError, "NOPERM": NoPermissionError, "READONLY": ReadOnlyError,
    "MOVED": MovedError, "ASK": MovedError, "CLUSTERDOWN": ClusterDownError,
    "TRYAGAIN": TryAgainError,
}
_CONNECTION_CODES = frozenset({"LOADING", "NOAUTH", "WRONGPASS"})


def reply_error(message: str) -> Exception:
    """The exception an error reply `message` raises. Pure."""
    code = message.split(" ", 1)[0]
    if code in _CONNECTION_CODES or message.startswith("ERR max number of clients"):
        return ConnectionLostError(message)
    return _BY_CODE.get(code, ReplyError)(message)
