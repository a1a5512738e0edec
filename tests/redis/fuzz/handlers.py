"""The fuzz suite's handler: it records every payload it runs, exactly, and fails those with a
'!' (so retries and dead-lettering see the same odd data)."""

from __future__ import annotations

import json

from tests.helpers.handlers import client
from tests.redis.fuzz.rawdata import DONE


def record_or_fail(payload: str) -> None:
    """Fail a payload holding '!', else record it in DONE as JSON (which keeps any str exact,
    lone surrogates included)."""
    if "!" in payload:
        raise ValueError("the payload asks to fail")
    client().rpush(DONE, json.dumps(payload))
