"""Real FUSE mounts: the page-cache model of writable mounts (``page_cache``), mappings.

An inode holds readers of one version or one writer, never both: readers share the page
cache and map files like on a local filesystem, a read-write writer alone on its inode maps
its chunk shared and writable (msync, numpy's ``flush()``, commits, as fsync does), and an
open that would break the rule is sent, unseen, to a fresh inode of the name.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import BytesCodec

from tests.cli.operating import stats
from tests.mounting import mounted, run_with_timeout
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

CHUNK = "c/0/000"  # the one chunk of a 1-D array of 64 uint8 (fanout view name)
ORIGINAL = np.arange(64, dtype="u1")


@pytest.fixture
def raw_array(tmp_path) -> Path:
    """64 uint8 in one chunk, stored raw: the chunk file's bytes are the values."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(64,), chunks=(64,), dtype="u1", fill_value=0,
                          serializer=BytesCodec(), compressors=None)
    a[:] = ORIGINAL
    return path


def stored(path: Path) -> np.ndarray:
    return zarr.open_array(path, mode="r")[:]


def wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("the store did not show the change in time")
        time.sleep(0.05)


def test_readers_of_a_writable_mount_map_shared_and_share_the_page_cache(
    raw_array, tmp_path
):
    """Like a local filesystem: a read-only open maps shared, numpy.load(mmap_mode="r")
    works on a .npy chunk, and a second read of an unchanged file is the kernel's."""
    with mounted(raw_array, tmp_path / "rw") as mnt:
        m = np.memmap(mnt / CHUNK, dtype="u1", mode="r")  # MAP_SHARED, PROT_READ
        np.testing.assert_array_equal(m, ORIGINAL)
        del m
        with open(mnt / CHUNK, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            assert m[:] == ORIGINAL.tobytes()
        assert (mnt / CHUNK).read_bytes() == ORIGINAL.tobytes()
        before = stats(mnt)["counters"]["requests"].get("read", 0)
        for _ in range(5):
            assert (mnt / CHUNK).read_bytes() == ORIGINAL.tobytes()
        assert stats(mnt)["counters"]["requests"].get("read", 0) == before  # served by the kernel
    with mounted(raw_array, tmp_path / "npy", "--format", "npy") as mnt:
        [npy] = list(mnt.rglob("*.npy"))
        np.testing.assert_array_equal(np.load(npy, mmap_mode="r"), ORIGINAL)


def test_a_commit_moves_new_readers_to_the_new_version_and_old_ones_keep_theirs(
    raw_array, tmp_path
):
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        old = np.memmap(mnt / CHUNK, dtype="u1", mode="r")  # shared, of the stored version
        with open(mnt / CHUNK, "rb") as reader:
            (mnt / CHUNK).write_bytes(b"\x03" * 64)  # cp: O_TRUNC, write, close
            assert reader.read() == ORIGINAL.tobytes()  # its own version, whole
        np.testing.assert_array_equal(old, ORIGINAL)
        del old
        assert (mnt / CHUNK).read_bytes() == b"\x03" * 64
        np.testing.assert_array_equal(np.memmap(mnt / CHUNK, dtype="u1", mode="r"), 3)
        assert os.stat(mnt / CHUNK).st_size == 64


def _private_mapper(path: str, ready, go, result) -> None:
    m = np.memmap(path, dtype="u1", mode="c")  # MAP_PRIVATE, as docs/writing.md advises
    first = bytes(m)
    ready.set()
    go.wait(30)
    m[:2] = 250  # its own copy: never reaches the file
    result.put((first, bytes(m[2:])))


def test_private_mappers_beside_a_mapped_writer_and_cp_see_one_version_and_live(
    raw_array, tmp_path
):
    """A numpy.memmap r+ writer with MAP_PRIVATE readers in other processes, then ``cp``
    onto the chunk: the writer's mapping holds exactly what it wrote, the store holds a
    value some writer wrote, and no reader dies of SIGBUS or sees a mix (issue 34's 1, 4)."""
    ctx = multiprocessing.get_context("spawn")
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        writer = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")
        writer[:] = 1
        writer.flush()  # committed: the store holds 1s
        np.testing.assert_array_equal(stored(raw_array), 1)
        readers = []
        for _ in range(3):
            ready, go, result = ctx.Event(), ctx.Event(), ctx.Queue()
            proc = ctx.Process(target=_private_mapper, args=(str(mnt / CHUNK), ready, go, result))
            proc.start()
            assert ready.wait(60)
            readers.append((proc, go, result))
        writer[:] = 2  # the writer's pages: the readers' mappings must not see them
        writer.flush()
        np.testing.assert_array_equal(writer, 2)
        np.testing.assert_array_equal(stored(raw_array), 2)
        (mnt / CHUNK).write_bytes(b"\x04" * 64)  # cp over it while the readers map it
        np.testing.assert_array_equal(writer, 2)  # the writer's own mapping is unchanged
        for proc, go, result in readers:
            go.set()
            first, rest = result.get(timeout=60)
            proc.join(60)
            assert proc.exitcode == 0, f"a private mapper died ({-proc.exitcode}: SIGBUS is "\
                f"{int(signal.SIGBUS)})"
            assert first == b"\x01" * 64  # the version committed when it opened
            assert rest == b"\x01" * 62  # untouched by the writer and by cp
        del writer
        np.testing.assert_array_equal(stored(raw_array), 4)  # the last to commit: cp


def test_a_mapped_writer_beside_an_o_trunc_writer_stores_exactly_its_bytes(
    raw_array, tmp_path
):
    """``cp`` has the chunk open with O_TRUNC, nothing written yet; numpy.memmap r+ opens it
    then: it sees the stored chunk's size (not the 0 of cp's open), maps it, and its close
    stores exactly its own bytes (issue 34's 2: it used to store the old chunk with byte 0
    zeroed)."""
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        fd = os.open(mnt / CHUNK, os.O_WRONLY | os.O_TRUNC)
        try:
            m = np.memmap(mnt / CHUNK, dtype="u1", mode="r+", shape=(64,))
            assert os.fstat(fd).st_size == 0  # cp's own inode: its size
            np.testing.assert_array_equal(m, ORIGINAL)
            m[10:20] = 99
            m.flush()
            del m
            expected = ORIGINAL.copy()
            expected[10:20] = 99
            np.testing.assert_array_equal(stored(raw_array), expected)
        finally:
            os.close(fd)  # closed unwritten after O_TRUNC: stores nothing
        np.testing.assert_array_equal(stored(raw_array), expected)
        assert (mnt / CHUNK).read_bytes() == expected.tobytes()


def test_two_read_write_writers_each_map_their_own_and_the_last_close_wins(
    raw_array, tmp_path
):
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        with open(mnt / CHUNK, "r+b") as first:
            second = np.memmap(mnt / CHUNK, dtype="u1", mode="r+")  # its own inode
            np.testing.assert_array_equal(second, ORIGINAL)
            second[:] = 5
            first.write(b"\x09" * 4)
            assert first.seek(0) == 0 and first.read(5) == b"\x09" * 4 + b"\x04"
            second.flush()
            np.testing.assert_array_equal(stored(raw_array), 5)
            del second
        assert stored(raw_array)[:5].tolist() == [9, 9, 9, 9, 4]  # first closed last


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


def test_tifffile_memmap_on_a_rendered_tiff_view(tmp_path):
    path = tmp_path / "img"
    a = zarr.create_array(path, shape=(32, 32), chunks=(16, 16), dtype="u2", fill_value=0)
    a[:] = np.arange(1024, dtype="u2").reshape(32, 32)
    with mounted(path, tmp_path / "mnt", "--format", "tiff") as mnt:
        tile = mnt / tile_path(0, 1, "tiff")
        m = tifffile.memmap(tile, mode="r+")
        m[0, :4] = 9999
        m.flush()
        del m
        np.testing.assert_array_equal(tifffile.imread(tile)[0, :5],
                                      [9999] * 4 + [20])
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[0, 16:21],
                                      [9999] * 4 + [20])


def test_the_page_owning_writer_reads_its_whole_buffer(raw_array, tmp_path):
    """The size the kernel holds for a writer's inode is the writer's: what it writes past
    the end is read back whole, and another writer's open (O_TRUNC) goes elsewhere."""
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        (mnt / CHUNK).unlink()
        fd = os.open(mnt / CHUNK, os.O_RDWR | os.O_CREAT)  # owns the pages, empty
        try:
            with open(mnt / CHUNK, "wb"):  # opened with O_TRUNC and closed unwritten
                pass
            os.pwrite(fd, b"\x07" * 64, 0)  # a whole chunk, so the close commits it
            assert os.pread(fd, 100, 0) == b"\x07" * 64
            assert os.fstat(fd).st_size == 64
        finally:
            os.close(fd)
        assert stored(raw_array).tolist() == [7] * 64


@pytest.mark.skipif(shutil.which("feh") is None, reason="feh is installed by scripts/dev")
@pytest.mark.parametrize("fmt", ["png", "tiff"])
def test_feh_opens_chunk_images_of_a_writable_mount(tmp_path, fmt):
    """feh's Imlib2 maps the files it loads (MAP_SHARED): on the default mount it used to
    find "No Imlib2 loader for that file format", as readers got direct I/O there."""
    path = tmp_path / "img"
    zarr.create_array(path, shape=(64, 64), chunks=(32, 32), dtype="u1")[:] = 7
    with mounted(path, tmp_path / "mnt", "--format", fmt) as mnt:
        files = sorted(str(p.relative_to(mnt)) for p in mnt.rglob(f"*.{fmt}"))
        assert len(files) == 4
        listed = run_with_timeout(["feh", "-l", *files], 60, cwd=mnt).stdout.splitlines()
        assert [line.split()[1:4] for line in listed[1:]] == [[fmt, "32", "32"]] * 4
