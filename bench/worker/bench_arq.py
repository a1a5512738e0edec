"""arq settings of the benchmark: `arq bench_arq.ArqSettings` (burst: exits when drained)."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings


async def arq_noop(ctx: dict[str, Any]) -> None:
    """Nothing."""


class ArqSettings:
    functions = [arq_noop]
    burst = True
    poll_delay = 0.01
    redis_settings = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])
