"""What the library definitions a Lua script carries cost per call, on a private redis-server.

Redis runs a script's whole body on every EVALSHA, so each `local function` and table of
taskqueue/wire/lua/lib/ spliced into a script is built again on every call. For each script
that includes libraries this times three bodies that do nothing else (`return 1` after them):
none, the libraries it includes whole (what the loader spliced before it resolved uses), and the
definitions `taskqueue.wire.scripts.lua` splices now (those the script uses; for a script with
`-- deferred:` definitions, what a call that never runs `load_deferred()` builds). The server's
microseconds per EVALSHA (`INFO commandstats`) of the fastest of `--batches` batches of
`--calls`; the variants alternate within each batch round, so load shifts hit all three.

    python bench/worker/luadefs.py [--calls 5000] [--batches 7]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def variants(name: str) -> dict[str, str] | None:
    """The three bodies for script `name` (None when it includes no library)."""
    from taskqueue.wire import scripts

    own = (ROOT / "operator/taskqueue/wire/lua" / f"{name}.lua").read_text("utf-8")
    libs = [line.split(":", 1)[1].strip() for line in own.splitlines()
            if line.startswith("-- include:")]
    if not libs:
        return None
    whole = "".join((ROOT / "operator/taskqueue/wire/lua/lib" / f"{lib}.lua").read_text("utf-8")
                    for lib in libs)
    definitions = [d for lib in libs for d in scripts.parse_library(
        (ROOT / "operator/taskqueue/wire/lua/lib" / f"{lib}.lua").read_text("utf-8"), lib=lib)]
    source = scripts.lua(name)
    used = "".join(d.text for d in definitions if d.text in source)
    forward = re.search(r"^local .* -- built by load_deferred\(\)\n", source, re.MULTILINE)
    if forward:  # the eager definitions only: what a call that builds no deferred one pays
        eager = source[:source.index(" = (function()\n")]
        used = forward.group(0) + "".join(d.text for d in definitions if d.text in eager)
    return {"none": "return 1\n", "whole libs": whole + "return 1\n",
            "used only": used + "return 1\n"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=7)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "operator")]
    import redis
    from tests.fixtures.redis_server import RedisServer

    names = sorted(p.stem for p in (ROOT / "operator/taskqueue/wire/lua").glob("*.lua"))
    bodies = {n: v for n in names if (v := variants(n)) is not None}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            client = redis.Redis(port=server.port)
            best: dict[tuple[str, str], float] = {}
            for _ in range(args.batches):
                for name, kinds in bodies.items():
                    for kind, body in kinds.items():
                        sha = client.script_load(body)
                        client.config_resetstat()
                        pipe = client.pipeline(transaction=False)
                        for _ in range(args.calls):
                            pipe.evalsha(sha, 0)
                        pipe.execute()
                        usec = float(client.info("commandstats")["cmdstat_evalsha"]
                                     ["usec_per_call"])
                        best[name, kind] = min(best.get((name, kind), usec), usec)
        finally:
            server.stop()
    print(f"{'script':<10} {'defs whole':>10} {'defs used':>9} {'none us':>8} "
          f"{'whole us':>9} {'used us':>8}")
    for name, kinds in bodies.items():
        counts = [kinds["whole libs"].count("local function"),
                  kinds["used only"].count("local function")]
        print(f"{name:<10} {counts[0]:>10} {counts[1]:>9} {best[name, 'none']:>8.2f} "
              f"{best[name, 'whole libs']:>9.2f} {best[name, 'used only']:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
