"""Model-based and crash tests of writing through a real mount.

The state machine (``tests/write_model.py``, shared with the in-process tier) applies random
opens, writes, truncates, reads, closes and unlinks to chunk files through the mount and to a
plain in-memory model, and compares every answer; readers held open across other handles'
O_TRUNC opens, writes and unlinks keep their version. The crash test kills the daemon with
SIGKILL in the middle of heavy writing and checks the store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from zarr.codecs import BytesCodec

import zarrfuse
from tests.mounting import daemon_pids, mounted, run_with_timeout, wait_for, wait_unmounted
from tests.write_model import CHUNKS, HEADER, PARTS, OsFiles, write_model

pytestmark = [pytest.mark.fuse]

CHUNK_BYTES = 4096


def make_array(path: Path) -> None:
    zarrfuse.create_array(path, shape=(CHUNKS, CHUNK_BYTES), chunks=(1, CHUNK_BYTES),
                          dtype="u1", fill_value=0, serializer=BytesCodec(), compressors=None,
                          storage_transformers=PARTS)


@pytest.mark.timeout(300)
def test_random_operations_match_the_model(tmp_path):
    store = tmp_path / "arr"
    make_array(store)
    # The model is of file semantics (any length): values are no valid chunks, so no checks.
    with mounted(store, tmp_path / "mnt", "--no-verify") as mnt:
        run_state_machine_as_test(
            write_model(OsFiles(mnt), store),
            settings=settings(max_examples=100, stateful_step_count=30, deadline=None,
                              suppress_health_check=list(HealthCheck)),
        )


WRITER = r"""
import os, sys
paths, size = sys.argv[2:], int(sys.argv[1])
k = 0
while True:
    k += 1
    for p in paths:
        with open(p, "wb") as f:
            f.write(bytes([k % 250 + 1]) * size)
"""


def _first_byte(path) -> int:
    with open(path, "rb") as f:
        return f.read(1)[0]


@pytest.mark.timeout(180)
def test_kill_minus_nine_mid_write_leaves_complete_parts(tmp_path):
    store = tmp_path / "arr"
    size = 1 << 20
    zarrfuse.create_array(store, shape=(8, size), chunks=(1, size), dtype="u1", fill_value=0,
                          serializer=BytesCodec(), compressors=None, storage_transformers=PARTS)
    arr = zarrfuse.open_array(store, mode="r+")
    arr[:] = 255
    mnt = tmp_path / "mnt"
    with mounted(store, mnt) as mounted_at:
        paths = [str(mounted_at / f"c/0/{i:03d}/0/000") for i in range(8)]
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(size), *paths],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Once a commit has landed, the writer is surely mid-write (it never pauses).
            assert wait_for(lambda: any(_first_byte(store / f"c/{i}/0") != 255
                                        for i in range(8)), 60), "no write landed"
            (pid,) = daemon_pids(mounted_at)
            os.kill(pid, signal.SIGKILL)
            writer.wait(30)  # its writes fail once the daemon is gone
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait(10)
        # Every part holds its old or a new complete value, never a torn one (the parts of
        # one chunk may differ until the next mount rolls the interrupted commit).
        for i in range(8):
            header = (store / f"c/{i}/0.header").read_bytes()
            body = (store / f"c/{i}/0").read_bytes()
            assert len(header) == HEADER and len(body) == size - HEADER
            assert len(set(header)) == 1 and len(set(body)) == 1, i
        # The dead mount is cleaned by `zarrfuse umount`, and a fresh mount works.
        run_with_timeout([sys.executable, "-m", "zarrfuse", "umount", str(mounted_at)], 30)
        assert wait_unmounted(mounted_at, 10)
    # The next mount finishes or undoes the commit the kill interrupted: every chunk is one
    # writer's whole value, never the header of one round on the body of another.
    with mounted(store, mnt) as again:
        for i in range(8):
            data = (again / f"c/0/{i:03d}/0/000").read_bytes()
            assert len(data) == size and len(set(data)) == 1, i
    values = zarrfuse.open_array(store)[:]
    assert all(len(set(row.tolist())) == 1 for row in values)
