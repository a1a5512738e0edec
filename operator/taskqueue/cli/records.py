"""Reading what the worker writes, whatever it holds: dead-letter records and shown text.

Pure. The CLI reads Redis with `surrogateescape` (`Target.connect`), so a payload that is not
UTF-8 arrives as text whose undecodable bytes are lone surrogates and goes back to Redis as the
same bytes (a requeue is byte-exact). `printable` shows such text on a terminal (`\\xff`);
`json_safe` makes a document `json.dumps` can print, with the exact bytes in base64 beside.
A malformed record (`"attempts": "x"`, no queue, a payload that is not a string, a JSON escape
of a lone surrogate such as `"\\ud800"`, which no byte stands for) never raises:
`DeadLetter.parse` notes each problem, and `unusable` says why a record cannot be requeued.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any


def to_bytes(text: str) -> bytes:
    """The bytes Redis holds for `text` (read with surrogateescape)."""
    return text.encode("utf-8", "surrogateescape")


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def has_bytes(text: str) -> bool:
    """True when `text` stands for bytes (no lone surrogate besides surrogate escapes)."""
    try:
        to_bytes(text)
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """`text` safe to print: bytes that are not UTF-8 as `\\xNN`, a lone surrogate that stands
    for no byte as `\\uXXXX`."""
    if text.isascii():  # no surrogate, every byte UTF-8: as it is (the common case, fast)
        return text
    if not has_bytes(text):
        return "".join(c if has_bytes(c) else f"\\u{ord(c):04x}" for c in text).encode(
            "utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return to_bytes(text).decode("utf-8", "backslashreplace")


def json_safe(value: Any) -> Any:
    """`value` with every string printable (undecodable bytes as `\\xNN`)."""
    if isinstance(value, str):
        return value if is_utf8(value) else printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def payload_fields(payload: str) -> dict[str, Any]:
    """`payload` for a JSON document: the text, and its exact bytes when it is not UTF-8."""
    if is_utf8(payload):
        return {"payload": payload}
    return {"payload": printable(payload), "payload_utf8": False,
            "payload_base64": base64.b64encode(to_bytes(payload)).decode("ascii")}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _string(data: dict[str, Any], name: str, problems: list[str]) -> str | None:
    """`data[name]` when it is a string that stands for bytes; else None, the problem noted."""
    value = data.get(name)
    if not isinstance(value, str):
        problems.append(f"{name} is not a string")
        return None
    if not has_bytes(value):
        problems.append(f"{name} holds an escaped lone surrogate (\\ud800-\\udfff), which "
                        "no byte stands for")
        return None
    return value


@dataclass(frozen=True)
class DeadLetter:
    """One dead-letter record as read; `raw` is the exact element (for LREM)."""

    raw: str
    queue: str = ""
    payload: str | None = None
    """None when the record carries no string payload (it cannot be requeued)."""
    attempts: int | None = None
    error: str = ""
    failed_at: float | None = None
    id: str = ""
    problems: tuple[str, ...] = field(default=())
    """What is malformed in the record, one phrase each (empty for a well-formed one)."""

    @classmethod
    def parse(cls, raw: str) -> DeadLetter:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return cls(raw, problems=("not a JSON object",))
        problems: list[str] = []
        if data.get("queue"):
            queue = _string(data, "queue", problems) or ""
        else:
            problems.append("no queue")
            queue = ""
        payload = _string(data, "payload", problems)
        attempts = data.get("attempts", 0)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            problems.append(f"attempts {printable(repr(attempts))} is not a count")
            attempts = None
        failed_at = _number(data.get("failed_at"))
        if data.get("failed_at") is not None and failed_at is None:
            problems.append("failed_at is not a time")
        task_id = (_string(data, "id", problems) or "") if "id" in data else ""
        error = data.get("error", "")
        return cls(raw=raw, queue=queue, payload=payload, attempts=attempts,
                   error=error if isinstance(error, str) else json.dumps(error),
                   failed_at=failed_at, id=task_id, problems=tuple(problems))

    def unusable(self) -> str | None:
        """Why this record cannot be put back (None: it can). A bad attempt count or time does
        not matter: a requeue starts again at attempt 0."""
        if self.payload is None:
            return "; ".join(p for p in self.problems if p != "no queue") or "no payload"
        return None

    def label(self) -> str:
        """How a message names the record: its task id, else the start of the record."""
        if self.id:
            return f"task {printable(self.id)}"
        text = printable(self.raw)
        return f"record {text[:40] + '...' if len(text) > 40 else text!r}"

    def as_json(self, now: float) -> dict[str, Any]:
        age = None if self.failed_at is None else round(now - self.failed_at, 3)
        doc: dict[str, Any] = {
            "id": self.id, "queue": self.queue, "attempts": self.attempts, "error": self.error,
            "failed_at": self.failed_at, "age_seconds": age,
        }
        doc = json_safe(doc)
        doc.update(payload_fields(self.payload if self.payload is not None else self.raw))
        if self.problems:
            doc["problems"] = [printable(p) for p in self.problems]
        return doc
