"""What a hand-over between two Python threads costs on this machine: a ping-pong over two
`queue.SimpleQueue`s (what a slot's inbox and a post are), round trips per second.

    python bench/worker/handover.py [--rounds 20000] [--repeat 3]

Half a round trip is what a task pays each time it wakes another thread (the dispatcher, or
the slot that runs it): compare with ~9 us for `Executor.run` of a no-op task.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time


def round_trip_us(rounds: int) -> float:
    ping: queue.SimpleQueue[int] = queue.SimpleQueue()
    pong: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        for _ in range(rounds):
            pong.put(ping.get())

    thread = threading.Thread(target=echo)
    thread.start()
    started = time.perf_counter()
    for i in range(rounds):
        ping.put(i)
        pong.get()
    elapsed = time.perf_counter() - started
    thread.join()
    return 1e6 * elapsed / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.repeat):
        rt = round_trip_us(args.rounds)
        print(f"round trip {rt:6.1f} us, one hand-over {rt / 2:6.1f} us")


if __name__ == "__main__":
    main()
