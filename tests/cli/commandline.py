"""Helpers shared by the command-line tests: run ``zarrfuse``, check one-line errors and
that a failed mount left nothing behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from shutil import which

import pytest

from tests.mounting import (
    ZARRFUSE,
    daemon_pids,
    is_mounted,
    requires_fuse,
    run_with_timeout,
)


def mount_test(test: Callable) -> Callable:
    """For a test that mounts: needs FUSE, is marked ``fuse``, and times out rather than hang."""
    return requires_fuse(pytest.mark.fuse(pytest.mark.timeout(60)(test)))


needs_bindfs = pytest.mark.skipif(which("bindfs") is None, reason="needs bindfs")


def zarrfuse(
    *args: str | os.PathLike[str], cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the ``zarrfuse`` command; its result whatever the exit status (the test fails if
    it runs past ``timeout`` seconds)."""
    return run_with_timeout([*ZARRFUSE, *args], timeout, check=False, cwd=cwd)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 1 and exactly one non-empty ``zarrfuse: ...`` line on stderr."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("zarrfuse: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def assert_left_nothing(mnt: Path) -> None:
    """Nothing mounted at ``mnt`` and no daemon serving it."""
    assert not is_mounted(mnt)
    assert daemon_pids(mnt) == []
