"""Real FUSE mounts: shared writable mappings of chunk files (numpy.memmap, tifffile.memmap).

A chunk file opened read-write by the only handle of it uses the kernel's page cache, so it
can be mapped; msync (``flush()``) commits, as fsync does. Other handles of the chunk get
direct I/O meanwhile, so two writers never mix.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import BytesCodec

from tests.mounting import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

CHUNK = "c/0/000"  # the one chunk of a 1-D array of 64 uint8 (fanout view name)


@pytest.fixture
def raw_array(tmp_path) -> Path:
    """64 uint8 in one chunk, stored raw: the chunk file's bytes are the values."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(64,), chunks=(64,), dtype="u1", fill_value=0,
                          serializer=BytesCodec(), compressors=None)
    a[:] = np.arange(64, dtype="u1")
    return path


def stored(path: Path) -> np.ndarray:
    return zarr.open_array(path, mode="r")[:]


def wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("the store did not show the change in time")
        time.sleep(0.05)


def test_numpy_memmap_write_flush_close_commits(raw_array, tmp_path):
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
        m[:4] = 200
        m.flush()  # msync: the pages reach the writer, then fsync commits
        expected = np.arange(64, dtype="u1")
        expected[:4] = 200
        np.testing.assert_array_equal(stored(raw_array), expected)
        assert (mnt / CHUNK).read_bytes() == expected.tobytes()
        m[60:] = 7  # changed again, then unmapped without flush: committed at release
        del m
        expected[60:] = 7
        wait_for(lambda: np.array_equal(stored(raw_array), expected))
        assert (mnt / CHUNK).read_bytes() == expected.tobytes()


def test_read_only_mappings(raw_array, tmp_path):
    """Read-only mounts map chunk files shared; writable mounts give readers direct I/O (a
    reader keeps its version, see page_cache), so there a read-only open maps privately
    (MAP_PRIVATE, numpy's mode "c") and a shared mapping fails loudly with ENODEV."""
    with mounted(raw_array, tmp_path / "ro", "--read-only") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r")
        np.testing.assert_array_equal(m, np.arange(64, dtype="u1"))
        del m
    with mounted(raw_array, tmp_path / "rw") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="c")
        np.testing.assert_array_equal(m, np.arange(64, dtype="u1"))
        del m
        with pytest.raises(OSError) as refused:
            np.memmap(mnt / CHUNK, dtype="u1", mode="r")
        assert refused.value.errno == errno.ENODEV


def test_mapped_writer_and_write_writer_never_mix(raw_array, tmp_path):
    original = np.arange(64, dtype="u1")
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
        m[:32] = 1  # not yet flushed
        for mode in ("r+b", "wb"):  # read-write, and write-only with O_TRUNC
            with open(mnt / CHUNK, mode) as other:  # gets direct I/O: its own buffer
                other.seek(32)
                other.write(bytes([2]) * 32)
            # The other writer's commit: its own buffer, never the mapping's pages.
            expected = np.concatenate([original[:32], np.full(32, 2, "u1")])
            if mode == "wb":
                expected[:32] = 0  # O_TRUNC: the file was empty before the write at 32
            np.testing.assert_array_equal(stored(raw_array), expected)
            # ... and the mapping still shows its own bytes only.
            np.testing.assert_array_equal(m[32:], original[32:])
            np.testing.assert_array_equal(m[:32], 1)
        m.flush()  # the mapping's commit wins as a whole: the last complete commit
        np.testing.assert_array_equal(stored(raw_array),
                                      np.concatenate([np.ones(32, "u1"), original[32:]]))
        del m


def test_second_read_write_open_gets_direct_io_and_cannot_be_mapped(raw_array, tmp_path):
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        with open(mnt / CHUNK, "r+b") as first:  # owns the chunk's pages
            with pytest.raises(OSError) as e:
                np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
            assert e.value.errno == errno.ENODEV
            first.write(b"\x09" * 4)
        assert stored(raw_array)[:5].tolist() == [9, 9, 9, 9, 4]
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")  # alone again: mappable
        del m


def test_tifffile_memmap_on_a_rendered_tiff_view(tmp_path):
    path = tmp_path / "img"
    a = zarr.create_array(path, shape=(32, 32), chunks=(16, 16), dtype="u2", fill_value=0)
    a[:] = np.arange(1024, dtype="u2").reshape(32, 32)
    with mounted(path, tmp_path / "mnt", "--format", "tiff") as mnt:
        tile = mnt / "c/0/000/0/001.tiff"
        m = tifffile.memmap(tile, mode="r+")
        m[0, :4] = 9999
        m.flush()
        del m
        np.testing.assert_array_equal(tifffile.imread(tile)[0, :5],
                                      [9999] * 4 + [20])
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[0, 16:21],
                                      [9999] * 4 + [20])


def test_the_page_owning_writer_keeps_its_size_while_others_open(raw_array, tmp_path):
    """The kernel takes the size shown as the size of the owner's pages: a later writer of
    another size must not cut what the owner reads back (found by the model test)."""
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        (mnt / CHUNK).unlink()
        fd = os.open(mnt / CHUNK, os.O_RDWR | os.O_CREAT)  # owns the pages, empty
        try:
            other = os.open(mnt / CHUNK, os.O_RDWR)  # direct I/O, empty too
            os.pwrite(fd, b"\x07" * 64, 0)  # a whole chunk, so the close commits it
            third = os.open(mnt / CHUNK, os.O_RDWR)  # the newest writer: still empty
            assert os.pread(fd, 100, 0) == b"\x07" * 64
            os.close(third)
            os.close(other)
        finally:
            os.close(fd)
        assert stored(raw_array).tolist() == [7] * 64
