"""values.yaml is documented value by value, and every value is in values.schema.json."""

from __future__ import annotations

import json
import re

from tests.helpers.chart import CHART

VALUES = CHART / "values.yaml"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-/\"]+):(?P<value>.*)$")


def test_values_yaml_points_editors_at_the_schema() -> None:
    first = VALUES.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=values.schema.json"


def undocumented_values(text: str) -> list[str]:
    """Leaf keys with no `# --` comment on themselves or on an enclosing key (helm-docs rules)."""
    missing: list[str] = []
    stack: list[tuple[int, str, bool]] = []  # (indent, key, documented)
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        match = _KEY.match(line)
        if not match or stripped.startswith("-"):
            comment = [] if not stripped else comment
            continue
        indent, key, value = len(match["indent"]), match["key"], match["value"].strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = any(c.startswith("# --") for c in comment) or any(d for *_, d in stack)
        comment = []
        path = ".".join([*(k for _, k, _ in stack), key])
        if value:  # a leaf: scalar, [] or {}
            if not documented:
                missing.append(path)
        else:
            stack.append((indent, key, documented))
    return missing


def test_every_value_has_a_doc_comment() -> None:
    assert undocumented_values(VALUES.read_text()) == []


def test_the_doc_check_notices_a_missing_comment() -> None:
    assert undocumented_values("a:\n  # -- doc\n  b: 1\n  c: 2\n") == ["a.c"]


def _schema_keys(schema: dict[str, object], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    props = schema.get("properties")
    if isinstance(props, dict) and schema.get("additionalProperties") is False:
        for name, sub in props.items():
            keys.add(prefix + name)
            keys |= _schema_keys(sub, f"{prefix}{name}.")
    return keys


def test_every_value_is_in_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    documented = {
        line.split(":")[0].strip()
        for line in VALUES.read_text().splitlines()
        if _KEY.match(line) and not line.startswith(" ")
    }
    assert documented <= _schema_keys(schema)
