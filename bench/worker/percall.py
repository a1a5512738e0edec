"""Deterministic cost per task of the worker, for before/after on a loaded machine: Redis
commands per task (INFO commandstats; commands run by a script's redis.call are counted too,
under their own name); with --profile, Python calls per task in each worker thread and, with a
--base-root, the functions whose calls per task differ; with --instructions, the CPU
instructions per task of the worker process (valgrind's callgrind counts them: unlike a clock,
the count does not depend on the machine's load; the worker runs ~50 times slower under it);
with --syscalls, the worker's system calls per task during the drain (strace -c -f attached).

One `taskqueue-worker` (bench.py's child: AtLeastOnce, prefetch 1, concurrency C, a no-op sync
or async handler) drains N raw tasks, as bench_bullmq.py runs it (`--envelopes`: tasks as the
client enqueues them, with an id, as tracing_cost.py runs it). The counters are reset after
the worker registered and settled and read when the last task completed; then the same worker
idles for as long and that window's counts (the periodic threads: heartbeat, lifecycle, flow,
promoter...) are printed apart and subtracted, so what is left is what the tasks cost.

    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 20000
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 5000 --profile
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 5000 --envelopes
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 2000 --instructions
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 5000 --syscalls

cProfile counts calls of Python functions and of builtins called as functions, not the slot
wrappers a frozen dataclass's __init__ goes through or the interpreter's own work: the
instruction count is the whole cost, the call counts say where it moved.

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

from bench import env, push, stop_children, wait_until  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue.wire import keys  # noqa: E402

QUEUE = "bq"
PROFILE_HOOK = HERE / "percall_profile.py"


def commands(r: redis.Redis) -> dict[str, int]:
    """calls per command since the last CONFIG RESETSTAT (INFO and CONFIG left out)."""
    stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()
            if name not in ("cmdstat_info", "cmdstat_config")}


def push_envelopes(r: redis.Redis, n: int) -> None:
    """n tasks as the client enqueues them (envelopes with an id), in batches."""
    for start in range(0, n, 10000):
        r.lpush(QUEUE, *[keys.wrap(f"t{i}", task_id=f"id{i}")
                         for i in range(start, min(n, start + 10000))])


class Callgrind:
    """The instruction counter of a worker run under callgrind (`callgrind_control`)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.pid = 0

    def argv(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}"]

    def _control(self, flag: str) -> None:
        subprocess.run(["callgrind_control", flag, str(self.pid)], check=True,
                       capture_output=True, timeout=120)

    def zero(self) -> None:
        self._control("-z")

    def dump(self) -> int:
        """Instructions since the last `zero` (a dump file per call, read back)."""
        before = set(self.out.parent.glob(f"{self.out.name}.*"))
        self._control("-d")
        wait_until(lambda: bool(set(self.out.parent.glob(f"{self.out.name}.*")) - before),
                   timeout=60, every=0.05)
        (dump,) = set(self.out.parent.glob(f"{self.out.name}.*")) - before
        wait_until(lambda: "totals:" in dump.read_text(), timeout=60, every=0.05)
        return next(int(line.split()[1]) for line in dump.read_text().splitlines()
                    if line.startswith("totals:"))


class Nothing:
    """No instruction counts (the worker runs as it is)."""

    pid = 0

    def argv(self) -> list[str]:
        return []

    def zero(self) -> None:
        pass

    def dump(self) -> int:
        return 0


class Strace:
    """The system calls of a running worker, counted by `strace -c -f` attached to it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._proc: subprocess.Popen[bytes] | None = None
        self.calls: dict[str, int] = {}
        """What the last `detach` counted."""

    def attach(self, pid: int) -> None:
        self._proc = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", str(self.out)],
                                      stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached to every thread before the tasks come

    def detach(self) -> dict[str, int]:
        """Calls per system call since `attach`."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(timeout=60)
        counts = {}
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
        return counts


def run(url: str, r: redis.Redis, *, root: Path, handler: str, conc: int, n: int,
        profile: Path | None, envelopes: bool, prefetch: int = 1,
        counter: Callgrind | Nothing | None = None, strace: Strace | None = None,
        ) -> tuple[dict[str, int], dict[str, int], float, int]:
    """(commands while draining, commands idling as long, seconds drained, instructions the
    tasks cost: drained minus idle, 0 without a Callgrind `counter`); with `strace`, the
    worker's system calls during the drain are left in `strace.calls`."""
    counter = counter or Nothing()
    r.flushall()
    argv = [sys.executable, str(root / "bench" / "worker" / "bench.py"), "--child", "ours",
            "--url", url, "--delivery", "AtLeastOnce", "--prefetch", str(prefetch), "--concurrency",
            str(conc), "--handler", handler, "0"]
    paths = [str(root / "bench" / "worker"), str(root / "operator"), str(root)]
    child_env = {**env(url), "PYTHONPATH": os.pathsep.join(paths)}
    if profile is not None:  # the hook profiles every thread from the first task on
        argv = [sys.executable, str(PROFILE_HOOK), str(profile), *argv[1:]]
        child_env |= {"PERCALL_DONE_KEY": f"{QUEUE}:stats", "PERCALL_TASKS": str(n)}
    child = subprocess.Popen([*counter.argv(), *argv], env=child_env, cwd=root,
                             stdout=subprocess.DEVNULL, stderr=None)
    counter.pid = child.pid
    slow = not isinstance(counter, Nothing)
    try:
        wait_until(lambda: r.zcard(f"{QUEUE}:workers") >= 1, timeout=600 if slow else 60,
                   every=0.05)
        time.sleep(10 if slow else 1.5)
        if strace is not None:
            strace.attach(child.pid)
        r.config_resetstat()
        counter.zero()
        t0 = time.perf_counter()
        if envelopes:
            push_envelopes(r, n)
        else:
            push(r, QUEUE, n)
        wait_until(lambda: int(r.hget(f"{QUEUE}:stats", "completed") or 0) >= n,
                   every=0.002)
        busy_instructions = counter.dump()
        elapsed = time.perf_counter() - t0
        if strace is not None:
            strace.calls = strace.detach()
        busy = commands(r)
        r.config_resetstat()
        counter.zero()
        time.sleep(elapsed)
        idle_instructions = counter.dump()
        idle = commands(r)
    finally:
        if profile is not None:
            wait_until(lambda: profile.with_suffix(".txt").exists(), timeout=60, every=0.05)
        stop_children([child])
    return busy, idle, elapsed, busy_instructions - idle_instructions


def calls_by_function(tsv: Path) -> dict[str, float]:
    """Python calls per task by function, summed over the threads (percall_profile's .tsv)."""
    out: dict[str, float] = {}
    for line in tsv.read_text().splitlines():
        _, function, calls = line.split("\t")
        out[function] = out.get(function, 0.0) + float(calls)
    return out


def diff(base: Path, this: Path, *, at_least: float = 0.05) -> None:
    """Print the functions whose calls per task differ between two profiles."""
    a, b = calls_by_function(base), calls_by_function(this)
    print(f"   calls per task, all threads: base {sum(a.values()):.1f}, this "
          f"{sum(b.values()):.1f}; by function (this - base):", flush=True)
    for function in sorted(set(a) | set(b), key=lambda f: (-abs(b.get(f, 0) - a.get(f, 0)), f)):
        d = b.get(function, 0.0) - a.get(function, 0.0)
        if abs(d) >= at_least:
            print(f"      {d:+6.2f}  ({a.get(function, 0.0):6.2f} -> {b.get(function, 0.0):6.2f})"
                  f"  {function}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=20000)
    p.add_argument("--base-root", type=Path, help="a checkout to compare with (before)")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--prefetch", type=int, default=1)
    p.add_argument("--handlers", nargs="+", choices=("sync", "async"), default=["sync", "async"])
    p.add_argument("--envelopes", action="store_true",
                   help="enqueue envelopes with ids (as the client does), not raw payloads")
    p.add_argument("--keep", help="with --profile: write the .txt/.tsv profiles into this dir")
    p.add_argument("--profile", action="store_true",
                   help="also Python calls per task per thread (cProfile; slows the worker)")
    p.add_argument("--instructions", action="store_true",
                   help="also CPU instructions per task (callgrind; slows the worker ~50x)")
    p.add_argument("--syscalls", action="store_true",
                   help="also system calls per task during the drain (strace -c -f)")
    a = p.parse_args()
    roots = ([("base", a.base_root)] if a.base_root else []) + [("this", ROOT)]
    handlers = {"sync": "bench_tasks:noop", "async": "bench_tasks:anoop"}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(a.keep or tmp_dir)
        tmp.mkdir(parents=True, exist_ok=True)
        server = RedisServer(tmp)
        server.start()
        try:
            r = redis.Redis.from_url(server.url)
            for kind in a.handlers:
                for name, root in roots:
                    prof = tmp / f"{name}-{kind}" if a.profile else None
                    counter = Callgrind(tmp / f"{name}-{kind}.cg") if a.instructions else None
                    strace = Strace(tmp / f"{name}-{kind}.strace") if a.syscalls else None
                    busy, idle, elapsed, instructions = run(
                        server.url, r, root=root, handler=handlers[kind], conc=a.concurrency,
                        n=a.tasks, profile=prof, envelopes=a.envelopes, prefetch=a.prefetch,
                        counter=counter, strace=strace)
                    label = (f"{name} c={a.concurrency} prefetch={a.prefetch} {kind}"
                             f"{' envelopes' if a.envelopes else ''}")
                    report(label, busy, idle, elapsed, a.tasks)
                    if strace is not None:
                        calls = sorted(strace.calls.items(), key=lambda kv: -kv[1])
                        print(f"   system calls per task (worker process, the drain): "
                              f"{sum(strace.calls.values()) / a.tasks:.3f}: " + ", ".join(
                                  f"{k} {v / a.tasks:.3f}" for k, v in calls
                                  if v / a.tasks >= 0.01), flush=True)
                    if counter is not None:
                        print(f"   CPU instructions per task (worker process, drain minus an "
                              f"idle window as long): {instructions / a.tasks:,.0f}", flush=True)
                    if prof is not None:
                        print((prof.with_suffix(".txt")).read_text(), flush=True)
                if a.profile and a.base_root:
                    diff(tmp / f"base-{kind}.tsv", tmp / f"this-{kind}.tsv")
        finally:
            server.stop()


def report(label: str, busy: dict[str, int], idle: dict[str, int], elapsed: float,
           n: int) -> None:
    names = sorted(set(busy) | set(idle), key=lambda k: -busy.get(k, 0))
    net = {k: busy.get(k, 0) - idle.get(k, 0) for k in names}
    total = sum(v for v in net.values())
    print(f"== {label}: {n} tasks in {elapsed:.2f} s; Redis commands per task (drain minus "
          f"an idle window as long): {total / n:.3f}", flush=True)
    for k in names:
        print(f"   {k:16s} {net[k] / n:8.4f}/task   (drain {busy.get(k, 0)}, "
              f"idle {idle.get(k, 0)})", flush=True)


if __name__ == "__main__":
    main()
