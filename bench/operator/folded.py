"""Where a process's CPU goes, from py-spy's folded stacks (`py-spy record --format raw`).

    python bench/operator/folded.py profile/op1-0.folded [--top 30] [--match taskqueue]

Prints, per function (`name (file)`), the share of samples in which it is on the stack
(inclusive) and at the top (self), highest inclusive first; `--match` keeps functions whose
file contains the text. Not part of the tests.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^:)]*)(?::\d+)?\)$")


def frames(stack: str) -> list[str]:
    """`name (file)` of each frame of one folded stack, outermost first (line numbers dropped)."""
    out = []
    for frame in stack.split(";"):
        m = FRAME.match(frame.strip())
        out.append(f"{m['name']} ({m['file']})" if m else frame.strip())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folded", type=Path)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--match", default="")
    args = p.parse_args()
    inclusive: collections.Counter[str] = collections.Counter()
    top: collections.Counter[str] = collections.Counter()
    total = 0
    for line in args.folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        names = frames(stack)
        for name in set(names):
            inclusive[name] += n
        top[names[-1]] += n
    print(f"{total} samples")
    shown = [(k, v) for k, v in inclusive.most_common() if args.match in k][:args.top]
    for name, n in shown:
        print(f"{100 * n / total:6.1f}% incl {100 * top[name] / total:6.1f}% self  {name}")


if __name__ == "__main__":
    main()
