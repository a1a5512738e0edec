"""Loading a TaskQueue manifest (YAML or JSON) with errors that name the field and the fix: one
line per problem (a YAML syntax error as `file:line:column: ...`), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from taskqueue.api.models import KIND, TaskQueue

MAX_NESTING = 64
"""The deepest nesting of collections a manifest file may have (a TaskQueue needs about 8):
PyYAML builds nested collections recursively, so a deeper file would end in a RecursionError
(at a depth that depends on the stack in use)."""
TOO_DEEP = f"collections nested more than {MAX_NESTING} deep (a manifest needs a few levels)"


def nesting(text: str) -> int:
    """The deepest nesting of collections in YAML `text`, from its tokens (the scanner is not
    recursive); raises yaml.YAMLError where the text does not scan."""
    import yaml

    depth = deepest = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.BlockMappingStartToken | yaml.BlockSequenceStartToken
                      | yaml.FlowMappingStartToken | yaml.FlowSequenceStartToken):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(token, yaml.BlockEndToken | yaml.FlowMappingEndToken
                        | yaml.FlowSequenceEndToken):
            depth -= 1
    return deepest


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the field and what to do."""


def describe(error: ValidationError, *, root: str = "") -> str:
    """One line per problem: `spec.queues[0].key: String should match pattern ...`."""
    lines = []
    for item in error.errors():
        path = root
        for part in item["loc"]:
            path += _step(part, first=not path)
        msg = item["msg"].removeprefix("Value error, ")
        # a message that names its fields itself (`spec.retry.deadLetterKey 'r' is ...`)
        lines.append(msg if path and msg.startswith(f"{path}.") else
                     f"{path or '(manifest)'}: {msg}")
    return "\n".join(lines)


def _step(part: int | str, *, first: bool) -> str:
    """One step of a field's path: `[0]`, `.key`, or `['a b']` for a map key that is not
    printable without a space (a `\r` in a key would break the line)."""
    if isinstance(part, int):
        return f"[{part}]"
    if not part.isprintable() or any(c.isspace() for c in part):
        return f"[{part!r}]"
    return part if first else f".{part}"


def parse(data: Any) -> TaskQueue:
    """A TaskQueue from already-decoded data (a dict from YAML, JSON or the API)."""
    if not isinstance(data, dict):
        raise ManifestError("manifest: expected a mapping with apiVersion, kind, metadata, spec")
    if data.get("kind", KIND) != KIND:
        raise ManifestError(f"kind: {data.get('kind')!r} is not {KIND}; pass a TaskQueue manifest")
    try:
        return TaskQueue.model_validate(
            {k: as_stored(v) for k, v in data.items()
             if k in ("apiVersion", "kind", "metadata", "spec")}
        )
    except ValidationError as exc:
        raise ManifestError(describe(exc)) from None


def as_stored(value: Any) -> Any:
    """`value` with every number that has a zero fraction (`3.0`) as an integer, as the API
    server stores a TaskQueue (an integer field takes it), so a file given with -f reads as the
    same object in the cluster would (a null field is no field: `statusschema.SpecModel`)."""
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_stored(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load(path: str | Path) -> TaskQueue:
    """The first TaskQueue document in the file at `path`."""
    import yaml  # only for -f: a worker pod gets its spec as JSON ($TASKQUEUE_MANIFEST)

    try:
        text = Path(path).read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
                            ) from None
    try:
        too_deep = nesting(text) > MAX_NESTING
        docs = [] if too_deep else [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(yaml_problem(path, exc, text)) from None
    if too_deep:
        raise ManifestError(f"{path}: not valid YAML: {TOO_DEEP}")
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == KIND:
            return parse(doc)
    raise ManifestError(f"{path}: no document with kind: {KIND}")


def yaml_problem(path: str | Path, error: Exception, text: str) -> str:
    """One line for a YAML error in `text` (the file at `path`): `tq.yaml:4:4: not valid YAML:
    expected ',' or ']', but got ':' (while parsing a flow sequence that starts at line 3,
    column 11)`."""
    import yaml

    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        at = error.position
        where = f"{path}:{text.count(chr(10), 0, at) + 1}:{at - text.rfind(chr(10), 0, at)}"
        return (f"{where}: not valid YAML: character #x{error.character:04x} is not allowed "
                f"({error.reason})")
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    context, start = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context and start is not None:
        problem += f" ({context} that starts at line {start.line + 1}, column {start.column + 1})"
    elif context:
        problem += f" ({context})"
    return f"{where}: not valid YAML: {problem}"


def loads_json(text: str) -> TaskQueue:
    """A TaskQueue from JSON text (how the operator hands the spec to worker pods)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"manifest JSON: {exc}") from None
    except RecursionError:
        raise ManifestError(f"manifest JSON: {TOO_DEEP}") from None
    return parse(data)
