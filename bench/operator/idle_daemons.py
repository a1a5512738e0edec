"""The idle cost of the TaskQueues a sharded replica does not own: N daemons sleeping as a
non-owned TaskQueue's daemon does (`handlers._sleep` on its stop, wake and membership-change
events, waking at most every `handlers.SHARD_CHECK_SECONDS`), CPU from getrusage over a window.

    python bench/operator/idle_daemons.py --daemons 10000 --seconds 60

kopf's own per-object work (watch events, its memo) is not in it: see shard_load.py.
Not part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import time

from taskqueue.controller import handlers


async def sleeper(stopped: asyncio.Event, changed: asyncio.Event) -> None:
    await asyncio.sleep(random.uniform(0, handlers.SHARD_CHECK_SECONDS))  # spread the wake-ups
    wake = asyncio.Event()
    while not stopped.is_set():
        await handlers._sleep(stopped, wake, handlers.SHARD_CHECK_SECONDS, changed)  # type: ignore[arg-type]


async def run(daemons: int, seconds: float) -> None:
    stopped, changed = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(sleeper(stopped, changed)) for _ in range(daemons)]
    await asyncio.sleep(handlers.SHARD_CHECK_SECONDS + 1)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    await asyncio.sleep(seconds)
    r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - t0
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    print(f"{daemons} sleeping non-owned daemons over {wall:.0f}s: {cpu / wall:.4f} cores, "
          f"{1e6 * cpu / wall / daemons:.2f} microcores each; max RSS "
          f"{r1.ru_maxrss / 1024:.0f} MiB")
    stopped.set()
    await asyncio.gather(*tasks)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemons", type=int, default=10000)
    p.add_argument("--seconds", type=float, default=60.0)
    args = p.parse_args()
    asyncio.run(run(args.daemons, args.seconds))


if __name__ == "__main__":
    main()
