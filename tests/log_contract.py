"""Log lines are part of the contract: a test fails if the code under test logs a WARNING or
worse that the test did not declare.

A test declares the lines it provokes with the ``expect_log`` fixture
(``expect_log(r"regex")``, matched with ``re.search`` against the formatted message; optional
``level``) or the marker ``@pytest.mark.expect_log(r"regex", ...)``. A declared line that
never came is no failure: a test may provoke a line on some stacks only. Lines of the mounted
daemon are another process's and are not seen here.

One line is no test's: asyncio's "Task was destroyed but it is pending!" is logged when the
garbage collector frees a task, in whichever test happens to run then (zarr's own
``StoreTests`` leave such tasks on the oldest stack), so it cannot be declared by the test
that caused it and is not counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

__all__ = ["LogContract", "expect_log_fixture", "log_contract_fixture"]


_GARBAGE_COLLECTED = "Task was destroyed but it is pending"


@dataclass
class LogContract:
    """The lines a test may log at WARNING or worse, and those it logged."""

    expected: list[tuple[re.Pattern[str], int]] = field(default_factory=list)
    seen: list[logging.LogRecord] = field(default_factory=list)

    def expect(self, pattern: str, level: int = logging.WARNING) -> None:
        self.expected.append((re.compile(pattern), level))

    def unexpected(self) -> list[str]:
        out = []
        for record in self.seen:
            message = record.getMessage()
            if record.name == "asyncio" and message.startswith(_GARBAGE_COLLECTED):
                continue
            if not any(p.search(message) and record.levelno >= level
                       for p, level in self.expected):
                out.append(f"{record.levelname} {record.name}: {message}")
        return out


class _Collector(logging.Handler):
    def __init__(self, contract: LogContract) -> None:
        super().__init__(logging.WARNING)
        self.contract = contract

    def emit(self, record: logging.LogRecord) -> None:
        self.contract.seen.append(record)


@pytest.fixture(autouse=True)
def log_contract_fixture(request: pytest.FixtureRequest) -> Iterator[LogContract]:
    contract = LogContract()
    for marker in request.node.iter_markers("expect_log"):
        for pattern in marker.args:
            contract.expect(pattern, marker.kwargs.get("level", logging.WARNING))
    collector = _Collector(contract)
    root = logging.getLogger()
    root.addHandler(collector)
    try:
        yield contract
    finally:
        root.removeHandler(collector)
    lines = contract.unexpected()
    if lines:
        pytest.fail("logged WARNING or worse without declaring it (expect_log):\n  "
                    + "\n  ".join(lines[:20]), pytrace=False)


@pytest.fixture(name="expect_log")
def expect_log_fixture(log_contract_fixture: LogContract) -> Callable[..., None]:
    """``expect_log(r"regex", level=logging.WARNING)``: this test may log such a line."""
    return log_contract_fixture.expect
