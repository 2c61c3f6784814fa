"""Model-based and crash tests of writing through a real mount.

The state machine applies random opens, writes, truncates, reads, closes and unlinks to chunk
files through the mount and to a plain in-memory model, and compares every answer; readers
held open across other handles' O_TRUNC opens, writes and unlinks keep their version. The crash
test kills the daemon with SIGKILL in the middle of heavy writing and checks the store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)
from zarr.codecs import BytesCodec

import zarrfuse
from tests.mounting import daemon_pids, mounted, run_with_timeout, wait_unmounted

pytestmark = [pytest.mark.fuse]

HEADER = 8  # a sized leading part: values shorter than this are refused at close
PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": HEADER}, {"key_suffix": ""}]}}]
CHUNKS = 4
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
        paths = [mnt / f"c/0/{i:03d}/0/000" for i in range(CHUNKS)]

        class WriteModel(RuleBasedStateMachine):
            handles = Bundle("handles")
            readers = Bundle("readers")

            def __init__(self) -> None:
                super().__init__()
                # Every example starts with chunks 0 and 1 stored and 2 and 3 absent.
                self.stored: list[bytes | None] = [None] * CHUNKS
                for i, path in enumerate(paths):
                    path.unlink(missing_ok=True)
                    if i < 2:
                        self.stored[i] = bytes([65 + i]) * (HEADER + 20 * i + 5)
                        path.write_bytes(self.stored[i])
                self.open: dict[int, tuple[int, bytearray, bool]] = {}
                self.reading: dict[int, bytes] = {}
                """Read-only handles and the version each opened: kept until it closes, across
                other handles' O_TRUNC opens, writes, commits and unlinks (issue 21)."""

            @rule(target=handles, chunk=st.integers(0, CHUNKS - 1), truncate=st.booleans())
            def open_for_writing(self, chunk, truncate):
                flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if truncate else 0)
                fd = os.open(paths[chunk], flags)
                # A writer starts from the committed chunk (empty with O_TRUNC). Opening with
                # O_TRUNC or creating is no change by itself: closed unwritten, it stores
                # nothing (README: "A file opened with O_TRUNC (or created) and closed
                # without a write stores nothing").
                start = b"" if truncate else (self.stored[chunk] or b"")
                self.open[fd] = (chunk, bytearray(start), False)
                return fd

            @rule(fd=handles, offset=st.integers(0, 300), data=st.binary(min_size=1, max_size=200))
            def write(self, fd, offset, data):
                if fd not in self.open:
                    return
                chunk, buffer, _ = self.open[fd]
                assert os.pwrite(fd, data, offset) == len(data)
                if offset > len(buffer):
                    buffer.extend(bytes(offset - len(buffer)))
                buffer[offset : offset + len(data)] = data
                self.open[fd] = (chunk, buffer, True)

            @rule(fd=handles, size=st.integers(0, 400))
            def truncate(self, fd, size):
                if fd not in self.open:
                    return
                chunk, buffer, _ = self.open[fd]
                os.ftruncate(fd, size)
                del buffer[size:]
                buffer.extend(bytes(size - len(buffer)))
                self.open[fd] = (chunk, buffer, True)

            @rule(fd=handles)
            def read_back(self, fd):
                if fd not in self.open:
                    return
                _, buffer, _ = self.open[fd]
                assert os.pread(fd, 1000, 0) == bytes(buffer)

            @rule(fd=consumes(handles))
            def close(self, fd):
                if fd not in self.open:
                    return
                chunk, buffer, dirty = self.open.pop(fd)
                if dirty and len(buffer) < HEADER:
                    with pytest.raises(OSError) as caught:
                        os.close(fd)
                    assert caught.value.errno == errno.EIO
                    return  # refused: the store keeps the old chunk
                os.close(fd)
                if dirty:
                    self.stored[chunk] = bytes(buffer)

            @rule(target=readers, chunk=st.integers(0, CHUNKS - 1))
            def open_for_reading(self, chunk):
                if self.stored[chunk] is None or any(
                        c == chunk for c, _, _ in self.open.values()):
                    return -1  # nothing to read, or a writer's uncommitted bytes in between
                fd = os.open(paths[chunk], os.O_RDONLY)
                self.reading[fd] = self.stored[chunk]
                return fd

            @rule(fd=readers, offset=st.integers(0, 300))
            def read_version(self, fd, offset):
                if fd not in self.reading:
                    return
                want = self.reading[fd]
                assert os.pread(fd, 5000, offset) == want[offset:]

            @rule(fd=consumes(readers))
            def close_reader(self, fd):
                if fd in self.reading:
                    del self.reading[fd]
                    os.close(fd)

            @rule(chunk=st.integers(0, CHUNKS - 1))
            def unlink(self, chunk):
                if any(c == chunk for c, _, _ in self.open.values()):
                    return  # an open writer would re-create it at close
                if self.stored[chunk] is None:
                    with pytest.raises(FileNotFoundError):
                        paths[chunk].unlink()
                else:
                    paths[chunk].unlink()
                    self.stored[chunk] = None

            @invariant()
            def committed_chunks_match(self):
                for chunk, want in enumerate(self.stored):
                    if any(c == chunk for c, _, _ in self.open.values()):
                        continue
                    if want is None:
                        assert not paths[chunk].exists()
                        assert not (store / f"c/{chunk}/0").exists()
                    else:
                        assert paths[chunk].read_bytes() == want
                        stored = (store / f"c/{chunk}/0.header").read_bytes() + (
                            store / f"c/{chunk}/0").read_bytes()
                        assert stored == want

            def teardown(self):
                for fd in [*self.open, *self.reading]:
                    with contextlib.suppress(OSError):
                        os.close(fd)

        run_state_machine_as_test(
            WriteModel,
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
            time.sleep(1.5)
            (pid,) = daemon_pids(mounted_at)
            os.kill(pid, signal.SIGKILL)
            writer.wait(30)  # its writes fail once the daemon is gone
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait(10)
        # Every part holds its old or a new complete value, never a torn one.
        for i in range(8):
            header = (store / f"c/{i}/0.header").read_bytes()
            body = (store / f"c/{i}/0").read_bytes()
            assert len(header) == HEADER and len(body) == size - HEADER
            assert len(set(header)) == 1 and len(set(body)) == 1, i
        # The dead mount is cleaned by `zarrfuse umount`, and a fresh mount works.
        run_with_timeout([sys.executable, "-m", "zarrfuse", "umount", str(mounted_at)], 30)
        assert wait_unmounted(mounted_at, 10)
    with mounted(store, mnt) as again:
        for i in range(8):
            data = (again / f"c/0/{i:03d}/0/000").read_bytes()
            assert len(data) == size
    # Parts may come from different rounds (header of one, body of the next), but zarr reads
    # every chunk without error.
    assert zarrfuse.open_array(store)[:].shape == (8, size)
