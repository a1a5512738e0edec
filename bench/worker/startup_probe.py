"""The handler of bench/worker/startup_count.py: at the first task, write the taskqueue modules
this process has loaded (JSON, to $STARTUP_PROBE_OUT) and end the process at once, so what is
counted is launch to first task."""

from __future__ import annotations

import json
import os
import sys


def loaded(payload: str) -> None:
    with open(os.environ["STARTUP_PROBE_OUT"], "w", encoding="utf-8") as f:
        json.dump(sorted(m for m in sys.modules if m.startswith("taskqueue")), f)
    os._exit(0)
