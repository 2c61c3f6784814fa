"""Helpers shared by the operating tests: foreground mounts, chunk files, stats, the repo root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.mounting import ZARRFUSE, force_unmount, requires_fuse, run_with_timeout

REPO = Path(__file__).resolve().parents[2]


def mount_test(test: Callable) -> Callable:
    """Needs FUSE, is marked ``fuse``, and times out rather than hang."""
    return requires_fuse(pytest.mark.fuse(pytest.mark.timeout(90)(test)))


def chunk_files(mnt: Path) -> list[Path]:
    """Every chunk file of a mounted array, sorted."""
    return sorted(p for p in mnt.rglob("*") if p.is_file() and p.name != "zarr.json")


@contextmanager
def foreground(source: Path, mnt: Path, *args: str, env: dict[str, str] | None = None):
    """``zarrfuse mount --foreground``; yields the process; always unmounted and stopped."""
    proc = subprocess.Popen(
        [*ZARRFUSE, "mount", str(source), str(mnt), "--foreground", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        yield proc
    finally:
        force_unmount(mnt)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def stats(mnt: Path) -> dict:
    """``zarrfuse stats --json`` of a mount, parsed."""
    return json.loads(run_with_timeout([*ZARRFUSE, "stats", "--json", mnt], 20).stdout)


def count(snapshot: dict, *path: str) -> int:
    """One counter of a ``stats(mnt)["counters"]`` snapshot (0 if it never moved)."""
    value = snapshot
    for key in path:
        value = value.get(key, {})
    return value or 0
