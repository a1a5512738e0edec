"""The `taskqueue` CLI run in-process by the fuzz tests (Hypothesis examples cannot use the
function-scoped `cli` fixture): `taskqueue.cli.main.main(argv)` with its output captured."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from taskqueue.cli.main import main


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Outcome:
    """`taskqueue ARGV` in-process (argparse's exit as its code)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return Outcome(code, out.getvalue(), err.getvalue())
