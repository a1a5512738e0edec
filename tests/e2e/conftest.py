"""e2e fixtures: the operator fixtures of tests/operator."""

from tests.operator.conftest import crd, run_operator

__all__ = ["crd", "run_operator"]
