"""Terminal helpers: durations, tables, a progress bar on stderr and the confirmation prompt."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

from taskqueue.cli.errors import EXIT_REFUSED, CliError
from taskqueue.wire import lifecycle


def duration(seconds: float | None) -> str:
    """`seconds` as `45s`, `3m05s`, `2h04m` or `3d02h`; `-` when unknown."""
    if seconds is None:
        return "-"
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, the header first."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    return "\n".join(lines)


def progress(report: lifecycle.Progress | None, *, now: float) -> str:
    """A handler's last progress report as `25% copying (3s ago)`; "-" for none. Pure."""
    if report is None:
        return "-"
    pct = "-" if report.fraction is None else f"{100 * report.fraction:.0f}%"
    return (f"{pct} {report.message}".rstrip() +
            f" ({duration(max(0.0, now - report.at))} ago)")


def preview(text: str, width: int = 40) -> str:
    """`text` on one line, cut to `width` characters."""
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class Progress:
    """`[#####.....]  50%  100000/200000` redrawn in place on stderr when it is a terminal."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.live or (now - self._last < 0.05 and done < self.total):
            return
        self._last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self.stream.write(f"\r{self.label} [{bar:<30}] {frac:4.0%} {done}/{self.total}")
        self.stream.flush()

    def finish(self) -> None:
        """Erase the bar (the caller prints its summary on stdout)."""
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def confirm(question: str, *, yes: bool, stdin: TextIO | None = None) -> None:
    """Return when `yes` or the user answers y; raise CliError(EXIT_REFUSED) otherwise."""
    if yes:
        return
    stdin = stdin or sys.stdin
    if not stdin.isatty():
        raise CliError(f"{question} — refusing without --yes (stdin is not a terminal)",
                       EXIT_REFUSED)
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if stdin.readline().strip().lower() not in ("y", "yes"):
        raise CliError("aborted: nothing was changed", EXIT_REFUSED)
