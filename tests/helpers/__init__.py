"""Helpers shared by the test modules (plain functions and classes; fixtures live in the
conftest.py files and in tests/fixtures, which import from here, never the other way)."""
