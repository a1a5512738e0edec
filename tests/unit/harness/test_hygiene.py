"""Process-wide state a test changes does not reach the next test (tests/fixtures/hygiene.py):
the signal handlers a worker run in-process installs, the root logger's handlers. The pairs of
tests run in a pytest of their own with that plugin, each change right before its check."""

from __future__ import annotations

import os

import pytest

from tests.conftest import TESTS

ROOT = TESTS.parent

CHANGED_THEN_AS_IT_WAS = {
    "sigint_handler": ("signal.signal(signal.SIGINT, lambda *_: None)",
                       "signal.getsignal(signal.SIGINT) is signal.default_int_handler"),
    "sigterm_handler": ("signal.signal(signal.SIGTERM, lambda *_: None)",
                        "signal.getsignal(signal.SIGTERM) is signal.SIG_DFL"),
    "root_logger_handler": ("logging.getLogger().addHandler(logging.FileHandler('leaked.log'))",
                            "not any(getattr(h, 'baseFilename', '').endswith('leaked.log') "
                            "for h in logging.getLogger().handlers)"),
}


def test_the_next_test_finds_it_as_it_was(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest("pytest_plugins = ['tests.fixtures.hygiene']")
    source = ["import logging", "import signal"]
    for name, (change, check) in CHANGED_THEN_AS_IT_WAS.items():
        source += [f"def test_{name}_changed():\n    {change}",
                   f"def test_{name}_as_it_was():\n    assert {check}"]
    pytester.makepyfile(test_pairs="\n\n\n".join(source) + "\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=2 * len(CHANGED_THEN_AS_IT_WAS))


def test_output_of_raw_bytes_reaches_the_report_from_an_xdist_worker(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that logs or fails on a string holding a producer's raw bytes (a lone surrogate)
    is reported as passed or failed, with the bytes escaped, not an INTERNALERROR of xdist."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest("pytest_plugins = ['tests.fixtures.hygiene']")
    pytester.makepyfile(test_raw=(
        "import logging\n\n"
        "def test_logs_raw_bytes():\n"
        "    logging.getLogger('x').error('payload %s', 'x\\udcffy')\n"
        "    print('x\\udcffy')\n\n"
        "def test_fails_on_raw_bytes():\n"
        "    assert 'x\\udcffy' == 'x'\n"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=1, failed=1)
    assert "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*x\\udcffy*"])
