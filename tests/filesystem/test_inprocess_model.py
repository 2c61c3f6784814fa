"""The model-based test of writing, in process (issue 22 point 3): the same state machine as
``tests/fuse/test_mount_model.py`` drives the ``FileSystem`` a mount would serve, with no
kernel and no daemon, so it runs many more examples: random opens (with and without
O_TRUNC), writes, truncates, reads, closes and unlinks of chunk files, and readers held open
across them, each answer compared with a plain in-memory model and the store."""

from __future__ import annotations

import contextlib
import errno
import os

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
from tests.inprocess import in_process

HEADER = 8  # a sized leading part: values shorter than this are refused at close
PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": HEADER}, {"key_suffix": ""}]}}]
CHUNKS = 4


@pytest.mark.timeout(600)
def test_random_operations_match_the_model_in_process(tmp_path):
    store = tmp_path / "arr"
    zarrfuse.create_array(store, shape=(CHUNKS, 4096), chunks=(1, 4096), dtype="u1",
                          fill_value=0, serializer=BytesCodec(), compressors=None,
                          storage_transformers=PARTS)
    paths = [f"c/0/{i:03d}/0/000" for i in range(CHUNKS)]
    with in_process(str(store), verify=False) as fs:

        class WriteModel(RuleBasedStateMachine):
            writers = Bundle("writers")
            readers = Bundle("readers")

            def __init__(self) -> None:
                super().__init__()
                self.stored: list[bytes | None] = [None] * CHUNKS
                for i, path in enumerate(paths):
                    if fs.exists(path):
                        fs.unlink(path)
                    if i < 2:  # chunks 0 and 1 start stored, 2 and 3 absent
                        self.stored[i] = bytes([65 + i]) * (HEADER + 20 * i + 5)
                        fs.write(path, self.stored[i])
                self.open: dict[int, tuple[int, bytearray, bool]] = {}
                self.reading: dict[int, bytes] = {}

            @rule(target=writers, chunk=st.integers(0, CHUNKS - 1), truncate=st.booleans())
            def open_for_writing(self, chunk, truncate):
                fd = fs.open(paths[chunk], os.O_RDWR | os.O_CREAT | (os.O_TRUNC * truncate))
                start = b"" if truncate else (self.stored[chunk] or b"")
                self.open[fd] = (chunk, bytearray(start), False)
                return fd

            @rule(fd=writers, offset=st.integers(0, 300), data=st.binary(min_size=1, max_size=200))
            def write(self, fd, offset, data):
                if fd not in self.open:
                    return
                chunk, buffer, _ = self.open[fd]
                assert fs.pwrite(fd, data, offset) == len(data)
                if offset > len(buffer):
                    buffer.extend(bytes(offset - len(buffer)))
                buffer[offset : offset + len(data)] = data
                self.open[fd] = (chunk, buffer, True)

            @rule(fd=writers, size=st.integers(0, 400))
            def truncate(self, fd, size):
                if fd not in self.open:
                    return
                chunk, buffer, _ = self.open[fd]
                fs.ftruncate(fd, size)
                del buffer[size:]
                buffer.extend(bytes(size - len(buffer)))
                self.open[fd] = (chunk, buffer, True)

            @rule(fd=writers)
            def read_back(self, fd):
                if fd in self.open:
                    assert fs.pread(fd, 1000, 0) == bytes(self.open[fd][1])

            @rule(fd=consumes(writers))
            def close(self, fd):
                if fd not in self.open:
                    return
                chunk, buffer, dirty = self.open.pop(fd)
                if dirty and len(buffer) < HEADER:
                    with pytest.raises(OSError) as caught:
                        fs.close(fd)
                    assert caught.value.errno in (errno.EIO, errno.EINVAL)
                    return  # refused: the store keeps the old chunk
                fs.close(fd)
                if dirty:
                    self.stored[chunk] = bytes(buffer)

            @rule(target=readers, chunk=st.integers(0, CHUNKS - 1))
            def open_for_reading(self, chunk):
                if self.stored[chunk] is None or any(
                        c == chunk for c, _, _ in self.open.values()):
                    return -1
                fd = fs.open(paths[chunk], os.O_RDONLY)
                self.reading[fd] = self.stored[chunk]
                return fd

            @rule(fd=readers, offset=st.integers(0, 300))
            def read_version(self, fd, offset):
                if fd in self.reading:
                    assert fs.pread(fd, 5000, offset) == self.reading[fd][offset:]

            @rule(fd=consumes(readers))
            def close_reader(self, fd):
                if fd in self.reading:
                    del self.reading[fd]
                    fs.close(fd)

            @rule(chunk=st.integers(0, CHUNKS - 1))
            def unlink(self, chunk):
                if any(c == chunk for c, _, _ in self.open.values()):
                    return
                if self.stored[chunk] is None:
                    with pytest.raises(FileNotFoundError):
                        fs.unlink(paths[chunk])
                else:
                    fs.unlink(paths[chunk])
                    self.stored[chunk] = None

            @invariant()
            def committed_chunks_match(self):
                for chunk, want in enumerate(self.stored):
                    if any(c == chunk for c, _, _ in self.open.values()):
                        continue
                    if want is None:
                        assert not fs.exists(paths[chunk])
                        assert not (store / f"c/{chunk}/0").exists()
                    else:
                        assert fs.read(paths[chunk]) == want
                        stored = (store / f"c/{chunk}/0.header").read_bytes() + (
                            store / f"c/{chunk}/0").read_bytes()
                        assert stored == want

            def teardown(self):
                for fd in [*self.open, *self.reading]:
                    with contextlib.suppress(OSError):
                        fs.close(fd)

        run_state_machine_as_test(
            WriteModel,
            settings=settings(max_examples=300, stateful_step_count=30, deadline=None,
                              suppress_health_check=list(HealthCheck)),
        )
