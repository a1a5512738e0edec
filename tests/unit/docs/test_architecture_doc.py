"""docs/architecture.md and the tree tell the same story: every module of `operator/taskqueue/`
and `devcluster/taskqueue_devcluster/` is in the table of its package, and every module a table
names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = {"taskqueue": ROOT / "operator" / "taskqueue",
            "taskqueue_devcluster": ROOT / "devcluster" / "taskqueue_devcluster"}
NOT_LISTED = {"__init__", "__main__"}

_HEADING = re.compile(r"^### `(?P<package>[\w/]+)/`")
_ROW = re.compile(r"^\| (?P<names>`[\w`, ]+`) \|")


def documented(text: str) -> dict[str, set[str]]:
    """Package path ("taskqueue/api") -> the modules its table names. Pure."""
    found: dict[str, set[str]] = {}
    package = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            package = heading["package"]
            found[package] = set()
        elif line.startswith("## "):
            package = None
        elif package is not None and (row := _ROW.match(line)):
            found[package] |= set(re.findall(r"`(\w+)`", row["names"]))
    return found


def in_tree() -> dict[str, set[str]]:
    """Package path -> its modules, as the source tree has them."""
    found: dict[str, set[str]] = {}
    for name, top in PACKAGES.items():
        for init in sorted(top.rglob("__init__.py")):
            package = "/".join((name, *init.parent.relative_to(top).parts))
            found[package] = {p.stem for p in init.parent.glob("*.py")} - NOT_LISTED
    return found


def test_every_package_has_a_table() -> None:
    assert sorted(in_tree()) == sorted(documented(DOC.read_text("utf-8")))


@pytest.mark.parametrize("package", sorted(in_tree()))
def test_the_table_of_each_package_names_exactly_its_modules(package: str) -> None:
    table = documented(DOC.read_text("utf-8")).get(package, set())
    modules = in_tree()[package]
    assert (sorted(modules - table), sorted(table - modules)) == ([], []), (
        f"docs/architecture.md, `{package}/`: (missing from the table, not in the tree)")


def test_a_table_row_may_name_several_modules() -> None:
    text = "### `taskqueue/x/`\n\n| module | one purpose |\n|---|---|\n| `a`, `b` | both |\n"
    assert documented(text) == {"taskqueue/x": {"a", "b"}}


def test_a_module_named_in_prose_is_not_a_table_entry() -> None:
    text = ("### `taskqueue/x/`\n\n`c` is mentioned here.\n\n| `a` | one |\n\n"
            "## Next\n\n| `z` | no |\n")
    assert documented(text) == {"taskqueue/x": {"a"}}
