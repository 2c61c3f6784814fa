"""Real FUSE mounts: shared writable mappings of chunk files (numpy.memmap, tifffile.memmap).

A chunk file opened read-write by the only writer of it uses the kernel's page cache, so it
can be mapped; msync (``flush()``) commits, as fsync does. Meanwhile other writers' opens of
the chunk fail with EBUSY (another writer would change the size the kernel holds for the
mapping), and readers get direct I/O: two writers never mix.
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


def _refused_busy(path: Path, mode: str) -> None:
    started = time.monotonic()
    with pytest.raises(OSError) as caught:
        open(path, mode)  # noqa: SIM115  (never opened)
    assert caught.value.errno == errno.EBUSY
    assert time.monotonic() - started < 10  # after a short wait for a RELEASE, not forever


def test_a_writer_beside_a_mapped_writer_is_refused_and_nothing_mixes(raw_array, tmp_path):
    original = np.arange(64, dtype="u1")
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
        m[:32] = 1  # not yet flushed
        for mode in ("r+b", "wb", "ab"):  # read-write, write-only with O_TRUNC, appending
            _refused_busy(mnt / CHUNK, mode)
        np.testing.assert_array_equal(stored(raw_array), original)  # nothing stored
        np.testing.assert_array_equal(m[:32], 1)  # the mapping keeps its bytes
        np.testing.assert_array_equal(m[32:], original[32:])
        assert (mnt / CHUNK).read_bytes() == original.tobytes()  # a reader: the stored chunk
        m.flush()  # the mapping's commit
        expected = np.concatenate([np.ones(32, "u1"), original[32:]])
        np.testing.assert_array_equal(stored(raw_array), expected)
        del m  # unmapped: RELEASE follows, and a writer may open again
        with open(mnt / CHUNK, "wb") as writer:
            writer.write(bytes([2]) * 64)
        assert stored(raw_array).tolist() == [2] * 64


def test_a_second_writer_beside_a_read_write_open_is_refused(raw_array, tmp_path):
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        with open(mnt / CHUNK, "r+b") as first:  # owns the chunk's pages
            with pytest.raises(OSError) as e:
                np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
            assert e.value.errno == errno.EBUSY
            private = np.memmap(mnt / CHUNK, dtype="u1", mode="c")  # a reader maps privately
            assert private.tolist() == list(range(64))
            del private
            first.write(b"\x09" * 4)
        assert stored(raw_array)[:5].tolist() == [9, 9, 9, 9, 4]
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")  # alone again: mappable
        del m


def test_a_read_write_open_beside_a_write_only_writer_is_direct(raw_array, tmp_path):
    """A writer already open (``cp``'s write-only one): a read-write open beside it uses
    direct I/O with its own buffer, so it cannot be mapped, and each commits its own."""
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        fd = os.open(mnt / CHUNK, os.O_WRONLY | os.O_TRUNC)
        try:
            with open(mnt / CHUNK, "r+b") as second:
                with pytest.raises(OSError) as e:  # its own open is direct I/O: no mapping
                    np.memmap(second, dtype="u1", mode="r+")
                assert e.value.errno == errno.ENODEV
                second.seek(0)  # numpy.memmap sought to the end
                assert second.read() == bytes(range(64))  # the committed chunk, not the O_TRUNC
                second.seek(0)
                second.write(b"\x05" * 64)
            assert stored(raw_array).tolist() == [5] * 64
            os.pwrite(fd, b"\x06" * 64, 0)
        finally:
            os.close(fd)  # the last to close wins
        assert stored(raw_array).tolist() == [6] * 64


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


def test_the_page_owning_writer_reads_its_whole_buffer(raw_array, tmp_path):
    """The kernel takes the size shown as the size of the owner's pages: what it writes past
    the end is read back whole, and other writers cannot change that size meanwhile."""
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        (mnt / CHUNK).unlink()
        fd = os.open(mnt / CHUNK, os.O_RDWR | os.O_CREAT)  # owns the pages, empty
        try:
            _refused_busy(mnt / CHUNK, "r+b")
            os.pwrite(fd, b"\x07" * 64, 0)  # a whole chunk, so the close commits it
            assert os.pread(fd, 100, 0) == b"\x07" * 64
            assert os.stat(mnt / CHUNK).st_size == 64
        finally:
            os.close(fd)
        assert stored(raw_array).tolist() == [7] * 64
