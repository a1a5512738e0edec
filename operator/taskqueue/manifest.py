"""Loading a TaskQueue manifest (YAML or JSON) with errors that name the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from taskqueue.models import KIND, TaskQueue


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the field and what to do."""


def describe(error: ValidationError, *, root: str = "") -> str:
    """One line per problem: `spec.queues[0].key: String should match pattern ...`."""
    lines = []
    for item in error.errors():
        path = root
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        msg = item["msg"].removeprefix("Value error, ")
        # a message that names its fields itself (`spec.retry.deadLetterKey 'r' is ...`)
        lines.append(msg if path and msg.startswith(f"{path}.") else
                     f"{path or '(manifest)'}: {msg}")
    return "\n".join(lines)


def parse(data: Any) -> TaskQueue:
    """A TaskQueue from already-decoded data (a dict from YAML, JSON or the API)."""
    if not isinstance(data, dict):
        raise ManifestError("manifest: expected a mapping with apiVersion, kind, metadata, spec")
    if data.get("kind", KIND) != KIND:
        raise ManifestError(f"kind: {data.get('kind')!r} is not {KIND}; pass a TaskQueue manifest")
    try:
        return TaskQueue.model_validate(
            {k: v for k, v in data.items() if k in ("apiVersion", "kind", "metadata", "spec")}
        )
    except ValidationError as exc:
        raise ManifestError(describe(exc)) from None


def load(path: str | Path) -> TaskQueue:
    """The first TaskQueue document in the file at `path`."""
    import yaml  # only for -f: a worker pod gets its spec as JSON ($TASKQUEUE_MANIFEST)

    text = Path(path).read_text("utf-8")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == KIND:
            return parse(doc)
    raise ManifestError(f"{path}: no document with kind: {KIND}")


def loads_json(text: str) -> TaskQueue:
    """A TaskQueue from JSON text (how the operator hands the spec to worker pods)."""
    try:
        return parse(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ManifestError(f"manifest JSON: {exc}") from None
