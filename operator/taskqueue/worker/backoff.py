"""Retry delays: exponential with equal jitter, capped. Pure."""

from __future__ import annotations

import math
import random

_RNG = random.Random()


def delay(*, attempts: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before the retry that follows attempt number `attempts` (1 = the first failure).

    base * 2**(attempts-1), capped at `cap`, then a uniformly random value in [d/2, d].
    """
    d = min(cap, math.ldexp(base, min(1000, max(0, attempts - 1))))
    return d / 2 + (rng or _RNG).uniform(0, d / 2)
