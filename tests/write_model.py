"""The model-based test of writing chunk files, one state machine for two drivers: the real
mount (``OsFiles``: plain ``os`` calls on the mountpoint) and the in-process filesystem
(``tests.inprocess.InProcess``, which has the same methods). Random opens (with and without
O_TRUNC), writes, truncates, reads, closes and unlinks, and readers held open across them,
are applied to the files and to an in-memory model, and every answer is compared, with the
store's parts after every step."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from tests.mounting import wait_for

__all__ = ["CHUNKS", "HEADER", "PARTS", "Files", "OsFiles", "write_model"]

HEADER = 8  # a sized leading part: values shorter than this are refused at close
PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": HEADER}, {"key_suffix": ""}]}}]
CHUNKS = 4
PATHS = [f"c/0/{i:03d}/0/000" for i in range(CHUNKS)]
RELEASE_WAIT = 5.0
"""Seconds a chunk file created and then refused may still be shown after its last close()
on a real mount (and a refused writer's size with it): the kernel sends FUSE's RELEASE after
close() has returned, without waiting for it, and the daemon drops the writer at RELEASE.
In process, release is part of close."""


class Files(Protocol):
    def open(self, path: str, flags: int) -> int: ...
    def pwrite(self, handle: int, data: bytes, offset: int) -> int: ...
    def pread(self, handle: int, size: int, offset: int) -> bytes: ...
    def ftruncate(self, handle: int, size: int) -> None: ...
    def close(self, handle: int) -> None: ...
    def unlink(self, path: str) -> None: ...
    def exists(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def read(self, path: str) -> bytes: ...
    def write(self, path: str, data: bytes) -> None: ...


class OsFiles:
    """The files of a mountpoint through plain system calls."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, path: str, flags: int) -> int:
        return os.open(self.root / path, flags)

    def pwrite(self, handle: int, data: bytes, offset: int) -> int:
        return os.pwrite(handle, data, offset)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        return os.pread(handle, size, offset)

    def ftruncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def close(self, handle: int) -> None:
        os.close(handle)

    def unlink(self, path: str) -> None:
        (self.root / path).unlink()

    def exists(self, path: str) -> bool:
        return (self.root / path).exists()

    def size(self, path: str) -> int:
        return (self.root / path).stat().st_size

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def write(self, path: str, data: bytes) -> None:
        (self.root / path).write_bytes(data)


def write_model(files: Files, store: Path) -> type[RuleBasedStateMachine]:
    """The state machine over ``files`` (the view of the concat-parts array at ``store``)."""

    def absent(path: str) -> Callable[[], bool]:
        return lambda: not files.exists(path)

    def sized(path: str, size: int) -> Callable[[], bool]:
        return lambda: files.size(path) == size

    class WriteModel(RuleBasedStateMachine):
        writers = Bundle("writers")
        readers = Bundle("readers")

        def __init__(self) -> None:
            super().__init__()
            self.stored: list[bytes | None] = [None] * CHUNKS
            for i, path in enumerate(PATHS):
                if files.exists(path):
                    # A file the last example created and refused goes at its RELEASE.
                    with contextlib.suppress(FileNotFoundError):
                        files.unlink(path)
                if i < 2:  # chunks 0 and 1 start stored, 2 and 3 absent
                    self.stored[i] = bytes([65 + i]) * (HEADER + 20 * i + 5)
                    files.write(path, self.stored[i])
            self.open: dict[int, tuple[int, bytearray, bool]] = {}
            self.readable: set[int] = set()
            """Writers opened read-write (the others cannot be read through). Each writer
            has its own buffer and its own inode (docs/writing.md, the page cache)."""
            self.reading: dict[int, bytes] = {}
            """Read-only handles and the version each opened: kept until it closes, across
            other handles' O_TRUNC opens, writes, commits and unlinks (issue 21)."""

        @rule(target=writers, chunk=st.integers(0, CHUNKS - 1), truncate=st.booleans(),
              read_write=st.booleans())
        def open_for_writing(self, chunk, truncate, read_write):
            flags = (os.O_RDWR if read_write else os.O_WRONLY) | os.O_CREAT
            fd = files.open(PATHS[chunk], flags | (os.O_TRUNC * truncate))
            if read_write:
                self.readable.add(fd)
            # A writer starts from the committed chunk (empty with O_TRUNC); opening with
            # O_TRUNC or creating stores nothing by itself (docs/writing.md).
            start = b"" if truncate else (self.stored[chunk] or b"")
            self.open[fd] = (chunk, bytearray(start), False)
            return fd

        @rule(fd=writers, offset=st.integers(0, 300), data=st.binary(min_size=1, max_size=200))
        def write(self, fd, offset, data):
            if fd not in self.open:
                return
            chunk, buffer, _ = self.open[fd]
            assert files.pwrite(fd, data, offset) == len(data)
            if offset > len(buffer):
                buffer.extend(bytes(offset - len(buffer)))
            buffer[offset : offset + len(data)] = data
            self.open[fd] = (chunk, buffer, True)

        @rule(fd=writers, size=st.integers(0, 400))
        def truncate(self, fd, size):
            if fd not in self.open:
                return
            chunk, buffer, _ = self.open[fd]
            files.ftruncate(fd, size)
            del buffer[size:]
            buffer.extend(bytes(size - len(buffer)))
            self.open[fd] = (chunk, buffer, True)

        @rule(fd=writers)
        def read_back(self, fd):
            if fd in self.open and fd in self.readable:
                assert files.pread(fd, 1000, 0) == bytes(self.open[fd][1])

        @rule(fd=consumes(writers))
        def close(self, fd):
            if fd not in self.open:
                return
            chunk, buffer, dirty = self.open.pop(fd)
            self.readable.discard(fd)
            if dirty and len(buffer) < HEADER:
                with pytest.raises(OSError) as caught:
                    files.close(fd)
                assert caught.value.errno == errno.EIO
                return  # refused: the store keeps the old chunk
            files.close(fd)
            if dirty:
                self.stored[chunk] = bytes(buffer)

        @rule(target=readers, chunk=st.integers(0, CHUNKS - 1))
        def open_for_reading(self, chunk):
            if self.stored[chunk] is None:
                return -1  # nothing to read (a new chunk being written is not stored)
            fd = files.open(PATHS[chunk], os.O_RDONLY)
            self.reading[fd] = self.stored[chunk]
            return fd

        @rule(fd=readers, offset=st.integers(0, 300))
        def read_version(self, fd, offset):
            if fd in self.reading:
                assert files.pread(fd, 5000, offset) == self.reading[fd][offset:]

        @rule(fd=consumes(readers))
        def close_reader(self, fd):
            if fd in self.reading:
                del self.reading[fd]
                files.close(fd)

        @rule(chunk=st.integers(0, CHUNKS - 1))
        def unlink(self, chunk):
            if any(c == chunk for c, _, _ in self.open.values()):
                return  # an open writer would re-create it at close
            if self.stored[chunk] is None:
                with pytest.raises(FileNotFoundError):
                    files.unlink(PATHS[chunk])
            else:
                files.unlink(PATHS[chunk])
                self.stored[chunk] = None

        @invariant()
        def committed_chunks_match(self):
            for chunk, want in enumerate(self.stored):
                if any(c == chunk for c, _, _ in self.open.values()):
                    continue
                if want is None:
                    assert wait_for(absent(PATHS[chunk]), RELEASE_WAIT, 0.01)
                    assert not (store / f"c/{chunk}/0").exists()
                else:
                    # The size a stat shows (the kernel reads cached pages up to it); a writer
                    # closed a moment ago shows its own until it is released (RELEASE_WAIT).
                    assert wait_for(sized(PATHS[chunk], len(want)), RELEASE_WAIT, 0.01)
                    assert files.read(PATHS[chunk]) == want
                    stored = (store / f"c/{chunk}/0.header").read_bytes() + (
                        store / f"c/{chunk}/0").read_bytes()
                    assert stored == want

        def teardown(self):
            for fd in [*self.open, *self.reading]:
                with contextlib.suppress(OSError):
                    files.close(fd)

    return WriteModel
