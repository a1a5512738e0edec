"""Helpers of the CLI tests: the result of one in-process `taskqueue` run."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Run = Callable[..., Result]


def console_script() -> list[str]:
    """The installed `taskqueue` console script (argv), else the module it runs."""
    found = shutil.which("taskqueue")
    return [found] if found else [sys.executable, "-m", "taskqueue.cli.console"]
