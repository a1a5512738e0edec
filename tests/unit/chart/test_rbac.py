"""The chart's RBAC rules are commented, each one."""

from __future__ import annotations

from tests.helpers.chart import CHART


def test_every_rule_is_commented() -> None:
    text = (CHART / "templates" / "rbac.yaml").read_text().splitlines()
    for i, line in enumerate(text):
        if line.lstrip().startswith("- apiGroups:"):
            above = text[i - 1].strip()
            # a rule is commented, or continues the rule group right above it (events)
            assert above.startswith("#") or above.startswith("verbs:"), f"rbac.yaml:{i + 1}"
