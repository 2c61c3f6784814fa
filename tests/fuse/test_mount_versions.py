"""A reader keeps the version it opened until it closes, whatever other processes do meanwhile
(issue 21, point 1): an ``O_TRUNC`` open (``cp`` does one), writes, commits, with the new
version shorter or longer, on raw and rendered views; and under many readers and writers at
once, every read returns whole bytes of one version that was written.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import ZstdCodec

from tests.mounting import mounted, wait_for

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def _compressed_array(root: Path) -> zarr.Array:
    array = zarr.create_array(root, shape=(64, 64), chunks=(64, 64), dtype="u1",
                              compressors=[ZstdCodec(level=1)], fill_value=255)
    array[...] = 0
    return array


def _stored(root: Path) -> bytes:
    return (root / "c" / "0" / "0").read_bytes()


def _pread_all(fd: int) -> bytes:
    out, offset = [], 0
    while piece := os.pread(fd, 1 << 16, offset):
        out.append(piece)
        offset += len(piece)
    return b"".join(out)


@pytest.mark.parametrize("new_first", [False, True], ids=["grows", "shrinks"])
def test_a_reader_keeps_its_version_across_o_trunc_writes_and_commits(tmp_path, new_first):
    store = tmp_path / "a.zarr"
    array = _compressed_array(store)
    small = _stored(store)  # zeros: a few bytes
    array[...] = np.random.default_rng(0).integers(0, 255, (64, 64), dtype="u1")
    large = _stored(store)  # random: about 4 KiB
    first, second = (large, small) if new_first else (small, large)
    (store / "c" / "0" / "0").write_bytes(first)
    with mounted(store, tmp_path / "mnt", "--layout", "source") as mnt:
        chunk = mnt / "c" / "0" / "0"
        reader = os.open(chunk, os.O_RDONLY)
        try:
            assert _pread_all(reader) == first
            writer = os.open(chunk, os.O_WRONLY | os.O_TRUNC)
            assert _pread_all(reader) == first  # the O_TRUNC open: still its version
            os.write(writer, second)
            assert _pread_all(reader) == first  # the other's uncommitted bytes: not seen
            os.close(writer)  # commits
            assert _stored(store) == second
            assert _pread_all(reader) == first  # committed: still the version it opened
            later = os.open(chunk, os.O_RDONLY)
            try:
                assert _pread_all(later) == second  # a new open reads the new version
                assert _pread_all(reader) == first
            finally:
                os.close(later)
        finally:
            os.close(reader)
        assert chunk.read_bytes() == second


def test_an_o_trunc_open_closed_unwritten_shows_the_stored_chunk_at_once(tmp_path):
    """``open(O_TRUNC)`` then ``close()`` with nothing written leaves the chunk as stored; the
    daemon learns of the close (FLUSH) before the handle goes (RELEASE, sent later, or only
    when the last duplicate closes). In between, the size shown was the closed handle's 0,
    which the kernel kept for its attribute timeout, and the next read-write opener (say
    ``numpy.memmap(mode="r+")``) read nothing: in 992 of 1000 tries beside a ``stat`` loop."""
    store = tmp_path / "a.zarr"
    _compressed_array(store)
    stored = _stored(store)
    with mounted(store, tmp_path / "mnt", "--layout", "source") as mnt:
        chunk = mnt / "c" / "0" / "0"
        emptying = os.open(chunk, os.O_RDWR | os.O_TRUNC)
        duplicate = os.dup(emptying)  # holds RELEASE back until it closes
        try:
            assert os.fstat(emptying).st_size == 0  # the O_TRUNC open's own inode's size
            os.close(emptying)  # FLUSH: closed unwritten, the chunk is as stored
            assert os.stat(chunk).st_size == len(stored)
            assert os.fstat(duplicate).st_size == len(stored)  # its inode too
            reader = os.open(chunk, os.O_RDONLY)
            try:
                assert _pread_all(reader) == stored
            finally:
                os.close(reader)
        finally:
            os.close(duplicate)
        writer = os.open(chunk, os.O_RDWR)  # waits for the RELEASE, then holds the pages
        try:
            assert os.fstat(writer).st_size == len(stored)
            assert _pread_all(writer) == stored
        finally:
            os.close(writer)
        assert chunk.read_bytes() == stored
    assert _stored(store) == stored


def test_a_read_write_holder_keeps_its_chunk_whole_beside_other_writers(tmp_path):
    """A read-write handle holds its inode's pages, and the kernel takes its size as the
    inode's. Other writers used to change that size under it (an O_TRUNC open sets it to 0,
    a write past the end raises it): a third of a holder's reads came back empty beside two
    ``cp`` loops, and later opens failed with EBUSY instead. Now every other writer opens
    the name on an inode of its own (docs/writing.md, the page cache): the holder reads its
    chunk whole throughout, the others write and commit, and the next read-write opener
    reads all of the new chunk, not as much as the old one had."""
    store = tmp_path / "a.zarr"
    array = _compressed_array(store)
    old = _stored(store)
    array[...] = np.random.default_rng(1).integers(0, 255, (64, 64), dtype="u1")
    new = _stored(store)
    assert len(new) > len(old)
    (store / "c" / "0" / "0").write_bytes(old)
    with mounted(store, tmp_path / "mnt", "--layout", "source") as mnt:
        chunk = mnt / "c" / "0" / "0"
        holder = os.open(chunk, os.O_RDWR)  # holds its pages, never writes
        try:
            for flags in (os.O_WRONLY | os.O_TRUNC, os.O_RDWR, os.O_WRONLY):
                other = os.open(chunk, flags)  # its own inode: never EBUSY
                assert os.fstat(other).st_size == (0 if flags & os.O_TRUNC else len(old))
                assert _pread_all(holder) == old
                os.close(other)  # unwritten: stores nothing
            assert os.fstat(holder).st_size == len(old)
            writer = os.open(chunk, os.O_WRONLY | os.O_TRUNC)
            os.write(writer, new)
            assert _pread_all(holder) == old  # a writer's bytes never reach the holder
            assert os.fstat(holder).st_size == len(old)
            os.close(writer)  # commits
            assert _pread_all(holder) == old
        finally:
            os.close(holder)
        reopened = os.open(chunk, os.O_RDWR)
        try:
            assert _pread_all(reopened) == new
        finally:
            os.close(reopened)
        assert os.stat(chunk).st_size == len(new)
    assert _stored(store) == new


def test_a_rendered_reader_keeps_its_image_across_a_save(tmp_path):
    store = tmp_path / "t.zarr"
    array = zarr.create_array(store, shape=(32, 32), chunks=(32, 32), dtype="u1", fill_value=255)
    array[...] = 3
    with mounted(store, tmp_path / "mnt", "--format", "tiff") as mnt:
        (tiff,) = list(mnt.rglob("*.tiff"))
        reader = os.open(tiff, os.O_RDONLY)
        try:
            before = _pread_all(reader)
            assert (tifffile.imread(tiff) == 3).all()
            tifffile.imwrite(tiff, np.full((32, 32), 9, "u1"))  # O_TRUNC, writes, close
            assert _pread_all(reader) == before
            assert (tifffile.imread(tiff) == 9).all()
        finally:
            os.close(reader)


def test_many_readers_and_two_writers_only_ever_read_whole_versions(tmp_path):
    """32 readers, 2 writers and 2 read-write openers in one process for a few seconds; each
    read (open, several preads, close) must equal one version a writer wrote, whole, and a
    read-write opener reads back what it wrote. No open fails: each writer has an inode of
    its own. Before writers were kept apart, a third of the read-write openers' reads came
    back empty."""
    store = tmp_path / "a.zarr"
    array = zarr.create_array(store, shape=(64, 64), chunks=(64, 64), dtype="u1",
                              compressors=None, fill_value=255)
    array[...] = 0
    versions = {bytes([v]) * 4096 for v in range(0, 200)}
    stop = threading.Event()
    failures: list[str] = []
    counts = {"reads": 0, "writes": 0, "read-write": 0}
    lock = threading.Lock()
    with mounted(store, tmp_path / "mnt", "--layout", "source") as mnt:
        chunk = mnt / "c" / "0" / "0"

        def write(first: int) -> None:
            value = first
            while not stop.is_set():
                fd = os.open(chunk, os.O_WRONLY | os.O_TRUNC)
                try:
                    for _ in range(4):  # in pieces, as cp does with big files
                        os.write(fd, bytes([value]) * 1024)
                finally:
                    os.close(fd)
                with lock:
                    counts["writes"] += 1
                value = (value + 2) % 200

        def in_pieces(fd: int) -> bytes:  # past the end too: a longer version would show
            return b"".join(os.pread(fd, 512, offset) for offset in range(0, 4608, 512))

        def tally(kind: str, got: bytes) -> None:
            with lock:
                counts[kind] += 1
                if got not in versions:
                    failures.append(f"{kind}: {len(got)} bytes, values {sorted(set(got))[:5]}")

        def read() -> None:
            while not stop.is_set():
                fd = os.open(chunk, os.O_RDONLY)
                try:
                    got = in_pieces(fd)
                finally:
                    os.close(fd)
                tally("reads", got)

        def read_write(value: int) -> None:
            while not stop.is_set():
                fd = os.open(chunk, os.O_RDWR)
                try:
                    got = in_pieces(fd)
                    os.pwrite(fd, bytes([value]) * 4096, 0)
                    mine = os.pread(fd, 8192, 0)
                finally:
                    os.close(fd)
                tally("read-write", got)
                if mine != bytes([value]) * 4096:
                    with lock:
                        failures.append(f"read back {len(mine)} bytes, {sorted(set(mine))[:5]}")

        threads = [threading.Thread(target=write, args=(i,)) for i in (1, 2)]
        threads += [threading.Thread(target=read_write, args=(v,)) for v in (101, 102)]
        threads += [threading.Thread(target=read) for _ in range(32)]
        for t in threads:
            t.start()
        # A workload, not a wait: until every kind has run many times over (a deadline
        # only against a hang; the asserts below then fail).
        wait_for(lambda: counts["writes"] >= 60 and counts["reads"] >= 600
                 and counts["read-write"] >= 60, 60)
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a thread hung"
    assert counts["writes"] > 10 and counts["reads"] > 100 and counts["read-write"] > 10, counts
    assert not failures, (
        f"{len(failures)} of {counts} reads were not a whole version: {failures[:10]}"
    )
