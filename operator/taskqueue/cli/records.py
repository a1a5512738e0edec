"""Reading what the worker writes, whatever it holds: dead-letter records and shown text.

Pure. The CLI reads Redis with `surrogateescape` (`Target.connect`), so a payload that is not
UTF-8 arrives as text whose undecodable bytes are lone surrogates and goes back to Redis as the
same bytes (a requeue is byte-exact). `printable` shows such text on a terminal (`\\xff`);
`json_safe` makes a document `json.dumps` can print, with the exact bytes in base64 beside.
A malformed record (`"attempts": "x"`, no queue, a payload that is not a string) never raises:
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


def printable(text: str) -> str:
    """`text` safe to print: bytes that are not UTF-8 as `\\xNN`."""
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
        queue = data.get("queue")
        if not isinstance(queue, str) or not queue:
            problems.append("no queue" if not queue else "queue is not a string")
            queue = ""
        payload = data.get("payload")
        if not isinstance(payload, str):
            problems.append("payload is not a string")
            payload = None
        attempts = data.get("attempts", 0)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            problems.append(f"attempts {printable(repr(attempts))} is not a count")
            attempts = None
        failed_at = _number(data.get("failed_at"))
        if data.get("failed_at") is not None and failed_at is None:
            problems.append("failed_at is not a time")
        task_id = data.get("id", "")
        if not isinstance(task_id, str):
            problems.append("id is not a string")
            task_id = ""
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
