"""The loader's splicing of the Lua libraries (`taskqueue.wire.scripts.lua`): each script carries
the library definitions it uses, directly or through another one, and no other. Pure: the
scripts' behaviour under Redis is tested in tests/redis (queueops, worker, flow, topologies)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from taskqueue.wire import scripts

LUA = resources.files("taskqueue.wire") / "lua"
NAMES = sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua"))
LIBS = sorted(p.name[:-4] for p in (LUA / "lib").iterdir() if p.name.endswith(".lua"))

LIB = """\
-- lib/x.lua: the opening comment, spliced into no script.

local A = 'a'  -- a constant
local B, C = 1,
  2

-- f(): uses A
local function f()
  return A
end
-- g(): uses f, and mentions h only in a comment: h()
local function g()
  return f() .. 'x'
end

local T = {k = true,
}
"""


def _code(text: str) -> str:
    """`text` without its comments (no string of the scripts holds "--")."""
    return re.sub(r"--[^\n]*", "", text)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", _code(text)))


def _definitions() -> dict[str, str]:
    """Every library definition's first name -> its text (the names are unique across libs)."""
    return {d.names[0]: d.text for lib in LIBS for d in scripts.parse_library(
        (LUA / "lib" / f"{lib}.lua").read_text("utf-8"), lib=lib)}


def test_a_library_splits_into_its_local_definitions_with_the_comments_above_them() -> None:
    found = scripts.parse_library(LIB)
    assert [d.names for d in found] == [("A",), ("B", "C"), ("f",), ("g",), ("T",)]
    assert found[0].text == "local A = 'a'  -- a constant\n"
    assert found[1].text == "local B, C = 1,\n  2\n\n"
    assert found[2].text.startswith("-- f(): uses A\nlocal function f()\n")
    assert found[2].text.endswith("end\n")
    assert found[3].uses >= {"f"} and "h" not in found[3].uses  # words in comments do not count
    assert "opening comment" not in "".join(d.text for d in found)


def test_what_a_body_uses_comes_with_what_that_uses_in_library_order() -> None:
    found = scripts.parse_library(LIB)
    assert [d.names[0] for d in scripts.needed(found, {"g", "x"})] == ["A", "f", "g"]
    assert [d.names[0] for d in scripts.needed(found, {"T", "B"})] == ["B", "T"]
    assert scripts.needed(found, {"nothing"}) == []


@pytest.mark.parametrize("code", ["redis.call('PING')\n", "x = 1\n", "if true then end\n"])
def test_top_level_code_outside_a_definition_is_refused(code: str) -> None:
    with pytest.raises(ValueError, match=r"lua/lib/x\.lua: top-level code outside a `local`"):
        scripts.parse_library(LIB + code, lib="x")


def test_a_name_defined_twice_is_refused() -> None:
    twice = scripts.parse_library(LIB) + scripts.parse_library("local A = 2\n")
    with pytest.raises(ValueError, match="'A' is defined twice"):
        scripts.needed(twice, {"A"})


@pytest.mark.parametrize("name", NAMES)
def test_a_script_carries_every_library_definition_it_uses_and_no_other(name: str) -> None:
    source = scripts.lua(name)
    own = (LUA / f"{name}.lua").read_text("utf-8")
    included = {line.split(":", 1)[1].strip() for line in own.splitlines()
                if line.startswith("-- include:")}
    carried = {n: t for n, t in _definitions().items() if t in source}
    rest = source
    for text in carried.values():
        rest = rest.replace(text, "", 1)
    for n, text in _definitions().items():
        if re.search(rf"^local (function )?{n}\b", own, re.MULTILINE):
            continue  # the script's own helper of that name (status.lua's now_ms)
        others = "".join(t for m, t in carried.items() if m != n)
        used = n in _words(rest + others)
        assert used == (n in carried), (
            f"{name}.lua: {n} {'used but not spliced in' if used else 'spliced in unused'}")
        if n in carried:
            lib = next(lib for lib in LIBS
                       if text in (LUA / "lib" / f"{lib}.lua").read_text("utf-8"))
            assert lib in included, f"{name}.lua uses {n} of lib/{lib}.lua without including it"
    code = re.sub(r"--[^\n]*", lambda m: " " * len(m.group()), source)
    forward = re.search(r"^local (.*) -- built by load_deferred\(\)$", source, re.MULTILINE)
    declared = set(forward.group(1).split(", ")) if forward else set()
    for n, text in carried.items():  # a Lua local is seen only below its definition
        if n in declared:
            assert code.index(forward.group(0)[:-len("-- built by load_deferred()")]) < min(
                m.start() for m in re.finditer(rf"\b{n}\b", code) if m.start() > forward.end())
            continue
        first = min(m.start() for m in re.finditer(rf"\b{n}\b", code))
        assert first >= source.index(text), f"{name}.lua: {n} used above its definition"


def test_the_worker_scripts_that_need_little_carry_little() -> None:
    assert scripts.lua("complete").count("local function") < 10
    assert "local function read_envelope(" not in scripts.lua("heartbeat")
    assert "local function add_count(" in scripts.lua("heartbeat")


def test_fetch_builds_the_definitions_of_its_rare_branches_only_when_one_runs() -> None:
    source = scripts.lua("fetch")
    load = source.index(" = (function()\n")
    line = source[source.rindex("\n", 0, load) + 1:load]
    assert line.startswith("if optional or task_prefix ~= '' or #due > 0 then ")
    eager = re.findall(r"^local function (\w+)", source[:load], re.MULTILINE)
    assert eager == ["join_entry", "type_of", "wrong_type", "add_count", "flow_present",
                     "flow_misfit", "flow_cap", "flow_took", "track_entries", "declared_types"]
    for name in ("place", "reject", "put", "flow_open", "drop_cancelled", "track", "task_id"):
        assert source.index(f"local function {name}(") > load
    assert not re.search(r"^-- deferred:", source, re.MULTILINE)
    assert "load_deferred() end" not in source
