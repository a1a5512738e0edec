"""`taskqueue resume QUEUE`: lift `taskqueue pause` of one queue (`taskqueue.cli.pause` has
both commands and how they relate to spec.queues[].paused)."""

from __future__ import annotations

import argparse

from taskqueue.cli import pause


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    pause.add_command(sub, "resume", pause.run_resume, help=help)
