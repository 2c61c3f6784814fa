"""Fixtures shared by all tests; the mount helpers themselves live in tests/mounting.py."""

from tests.mounting import mountpoint  # noqa: F401  (a fixture: a fresh directory to mount on)
