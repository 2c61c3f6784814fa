"""A hang guard for a call whose answer the test waits for: the test fails, instead of
hanging, when no answer comes by a deadline far above any time the code under test is
given. The deadline is no performance figure (those belong in ``bench/``): the behaviour is
asserted on what the call answers, and the guard only turns "never" into a failure."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

__all__ = ["HANG", "answered"]

T = TypeVar("T")

HANG = 60.0
"""Seconds after which a call that should have been answered counts as hung."""


def answered(call: Callable[[], T], what: str, hang: float = HANG) -> T:
    """``call()``'s result, or the exception it raised; fails the test if it is still
    running after ``hang`` seconds (it is left running in a daemon thread: the test's
    teardown, which resumes a stalled store or unmounts, lets it end)."""
    outcome: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as e:  # noqa: BLE001  (handed to the test's thread)
            outcome.append((None, e))

    thread = threading.Thread(target=run, name=f"answered: {what}", daemon=True)
    thread.start()
    thread.join(hang)
    if not outcome:
        pytest.fail(f"{what}: no answer within {hang:g} s (hung)")
    result, error = outcome[0]
    if error is not None:
        raise error
    return result  # type: ignore[return-value]
