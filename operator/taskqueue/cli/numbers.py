"""Argument types of the CLI's numeric options: each accepts a finite number in a stated range.

The ranges are `taskqueue.api.limits.Bounds`, as the Python client checks them, so `nan`, `inf`
and out-of-range values are refused before anything is sent, as one line that names the option
and says the range: while the command line is parsed (`number`, `whole`: argparse adds the
option's name), or by the command (`require`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from taskqueue.api.limits import Bounds
from taskqueue.cli.errors import EXIT_USAGE, CliError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


def number(bounds: Bounds, *, parse: Callable[[str], float] = float,
           what: str = "a number") -> Callable[[str], float]:
    """The argparse type of a number within `bounds`; `parse` reads the text (ValueError or
    ArgumentTypeError when it is not `what`)."""

    def convert(text: str) -> float:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {what}; give {bounds.says}") from None
        if not bounds.accepts(value):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; give {bounds.says}")
        return value

    return convert


def whole(bounds: Bounds) -> Callable[[str], int]:
    """The argparse type of a whole number within `bounds` (which has `whole` set)."""
    convert = number(bounds, parse=int, what="a whole number")
    return lambda text: int(convert(text))


def require(option: str, value: float, bounds: Bounds) -> None:
    """CliError (exit 2) naming `option` and the range unless `bounds` accepts `value`."""
    if not bounds.accepts(value):
        raise CliError(f"{option} {value!r} is out of range; give {bounds.says}", EXIT_USAGE)


def duration(text: str) -> float:
    """Seconds of '30s', '5m', '2h', '1d' or a plain number of seconds. Pure."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; use e.g. 30s, 5m, 2h, 1d or seconds")
    return float(m.group(1)) * _UNITS[m.group(2)]
