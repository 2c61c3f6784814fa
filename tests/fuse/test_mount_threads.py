"""The daemon's threads stay within its mount's bounds after a busy run (issue 53 point 5):
many readers and writers at once, each write a commit, and no thread more than the mount's
pools allow (``MountContext``: io, cpu, colouring, waits; trio's own bound for kernel invalidations;
the store watch and the warming thread)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zarr

from tests.mounting import daemon_pid, mounted
from zarrfuse.filesystem.chunks.mount_context import IO_THREADS, WAITING_THREADS

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

TRIO_DEFAULT = 40  # trio's own bound, per trio run: the adapter's kernel invalidations
FIXED = 4  # the main thread, the store watch, the warming thread, the request loop
COLOURING = 1  # the thread colouring composite tiles
WRITERS = 32


def _threads(pid: int) -> list[str]:
    tasks = Path(f"/proc/{pid}/task")
    return [(tasks / tid / "comm").read_text().strip() for tid in os.listdir(tasks)]


def test_the_daemon_s_threads_stay_bounded_after_a_busy_run(tmp_path):
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(64, 1 << 12), chunks=(1, 1 << 12), dtype="u1",
                      compressors=None, fill_value=0)
    with mounted(path, tmp_path / "mnt") as mnt:
        def busy(i: int) -> None:
            for round_ in range(4):
                chunk = mnt / f"c/0/{(i + round_ * WRITERS) % 64:03d}/0/000"
                chunk.write_bytes(bytes([i]) * (1 << 12))  # a commit each
                assert len(chunk.read_bytes()) == 1 << 12
                assert f"{(i + round_ * WRITERS) % 64:03d}" in os.listdir(mnt / "c/0")

        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(busy, range(WRITERS)))
        threads = _threads(daemon_pid(mnt))
    bound = (FIXED + IO_THREADS + (os.cpu_count() or 1) + COLOURING + WAITING_THREADS
             + TRIO_DEFAULT)
    assert len(threads) <= bound, sorted(threads)
