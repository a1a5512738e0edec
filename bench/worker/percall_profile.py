"""percall.py's profiling wrapper: `python percall_profile.py OUT script args...` runs `script`
with a cProfile profiler in each thread it starts, enabled from the first completed task, and
writes OUT.txt (Python calls per task, per thread, with the most called functions) and OUT.tsv
(thread, function, calls per task: every function, to diff two runs) when the stats hash counts
PERCALL_TASKS completed tasks."""

from __future__ import annotations

import cProfile
import os
import pstats
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis

OUT = Path(sys.argv[1])
SCRIPT = sys.argv[2]
TASKS = int(os.environ["PERCALL_TASKS"])
go = threading.Event()
profilers: dict[str, cProfile.Profile] = {}


def hook(frame: Any, event: str, arg: Any) -> None:
    if not go.is_set():
        return
    name = threading.current_thread().name
    prof = cProfile.Profile()
    profilers[f"{name} #{len(profilers)}"] = prof
    prof.enable()  # replaces this hook in this thread


def done_count(r: redis.Redis) -> int:
    return int(r.hget(os.environ["PERCALL_DONE_KEY"], "completed") or 0)


def watch() -> None:
    r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    while (first := done_count(r)) < 1:
        time.sleep(0.0005)
    go.set()
    while (last := done_count(r)) < TASKS:
        time.sleep(0.002)
    n = last - first
    lines, full = [], []
    for name, prof in sorted(profilers.items()):
        st = pstats.Stats(prof)
        calls = sum(v[1] for v in st.stats.values())  # type: ignore[attr-defined]
        if calls == 0:
            continue
        lines.append(f"   thread {name}: {calls / n:.1f} Python calls/task")
        ranked = sorted(st.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
        full += [f"{name.split(' #')[0]}\t{Path(file).name}:{func}\t{v[1] / n:.3f}"
                 for (file, _, func), v in ranked]
        top = ranked[:12]
        for (file, line, func), v in top:
            lines.append(f"      {v[1] / n:7.2f}  {Path(file).name}:{line} {func}")
    OUT.with_suffix(".tsv").write_text("\n".join(full) + "\n")  # every function, for a diff
    OUT.with_suffix(".txt").write_text("\n".join(lines) + "\n")


threading.Thread(target=watch, daemon=True).start()
threading.setprofile(hook)
sys.argv = sys.argv[2:]
runpy.run_path(SCRIPT, run_name="__main__")
