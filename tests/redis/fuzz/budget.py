"""The fuzz suite's Hypothesis settings: deterministic and bounded in CI, longer on request.

Every fuzz test takes its example count from `examples(n)`: `n` in CI (a fixed derandomized
seed, no example database, so two runs try the same inputs and the suite stays within its time
budget), `n` times $TASKQUEUE_FUZZ_EXAMPLES when that is set (random seeds and the example
database in .hypothesis/, so a hunt finds new inputs and replays what failed):

    TASKQUEUE_FUZZ_EXAMPLES=20 python -m pytest tests/redis/fuzz -q -p no:randomly

`scripts/test --fast` sets $TASKQUEUE_FUZZ_DIVISOR=4: each test tries a quarter of its `n`
(at least 3), with the same fixed seed; `scripts/test`, the CI command, tries them all.

Each example resets the Redis it uses itself (the `redis_url` fixture flushes per test, not
per example).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

SCALE_ENV = "TASKQUEUE_FUZZ_EXAMPLES"
DIVISOR_ENV = "TASKQUEUE_FUZZ_DIVISOR"
QUICK_MIN_EXAMPLES = 3
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
"""Hypothesis's phases but `explain` (which reruns a failing example a hundred times to say
which parts of it matter: minutes with a worker per example)."""


def _whole(name: str) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"${name} must be a whole number >= 1 (got {text!r})")
    return int(text)


def scale() -> int:
    """The multiplier of every test's example count ($TASKQUEUE_FUZZ_EXAMPLES, default 1)."""
    return _whole(SCALE_ENV)


def count(n: int) -> int:
    """The examples a test of `n` tries: `n` x the scale, or `n` / $TASKQUEUE_FUZZ_DIVISOR in
    the fast tier (at least QUICK_MIN_EXAMPLES, never more than `n`)."""
    divisor = _whole(DIVISOR_ENV)
    if divisor == 1:
        return n * scale()
    return min(n, max(QUICK_MIN_EXAMPLES, -(-n // divisor)))


def examples(n: int) -> settings:
    """Settings of a fuzz test that tries `n` examples in CI (`n` x the scale when hunting)."""
    hunting = scale() > 1
    return settings(max_examples=count(n), derandomize=not hunting,
                    database=settings.default.database if hunting else None,
                    deadline=None, print_blob=True, phases=PHASES,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
