"""A writable mount while its store watch runs (issue 35, point 1), in process: chunk files
are kept as long as on a read-only mount (the kernel's timeouts, chunks kept open), each
commit drops what was kept of its chunk, a file being written keeps the short timeout, and
when the watch fails the mount stops relying on it. Through the kernel, with real changes
by other programs: ``tests/fuse/test_mount_follows_store.py``."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pyfuse3
import pytest
import zarr

from tests.inprocess import CTX, in_process
from zarrfuse.fuse.cache_times import READ_ONLY_TIMEOUT, WRITABLE_TIMEOUT

CHUNK = "c/0/001/0/000"


@pytest.fixture
def rows(tmp_path) -> Path:
    """8 rows of 16 uint8, one chunk each, uncompressed, all stored."""
    path = tmp_path / "rows"
    zarr.create_array(path, data=np.arange(128, dtype="u1").reshape(8, 16), chunks=(1, 16),
                      compressors=None)
    return path


def _timeouts(fs, path: str) -> tuple[float, float]:
    parent, _, name = path.rpartition("/")
    entry = fs._call(fs.ops.lookup, fs.inode(parent), name.encode(), CTX)
    return entry.entry_timeout, entry.attr_timeout


def _opened_anew(fs) -> int:
    return fs.ops.counters.cache["open_in_thread"] + fs.ops.counters.store["open"]


def test_chunk_files_are_kept_long_only_while_the_watch_runs(rows):
    with in_process(str(rows)) as fs:
        assert _timeouts(fs, CHUNK) == (WRITABLE_TIMEOUT, WRITABLE_TIMEOUT)
        fs.watch_starts()
        assert _timeouts(fs, CHUNK) == (READ_ONLY_TIMEOUT, READ_ONLY_TIMEOUT)
        assert _timeouts(fs, "c/0/001") == (READ_ONLY_TIMEOUT, READ_ONLY_TIMEOUT)
        assert _timeouts(fs, "zarr.json") == (WRITABLE_TIMEOUT, WRITABLE_TIMEOUT)
        handle = fs.open(CHUNK, 0o1)  # O_WRONLY: the kernel changes its size itself
        assert _timeouts(fs, CHUNK) == (WRITABLE_TIMEOUT, WRITABLE_TIMEOUT)
        fs.close(handle)
        assert _timeouts(fs, CHUNK) == (READ_ONLY_TIMEOUT, READ_ONLY_TIMEOUT)
        fs.watch_ends()
        assert _timeouts(fs, CHUNK) == (WRITABLE_TIMEOUT, WRITABLE_TIMEOUT)


def test_kept_chunks_are_dropped_by_each_commit(rows):
    with in_process(str(rows)) as fs:
        fs.watch_starts()
        assert fs.read(CHUNK) == bytes(range(16, 32))
        opened = _opened_anew(fs)
        hits = fs.ops.counters.cache["open_hit"]
        assert fs.read(CHUNK) == bytes(range(16, 32))
        assert (_opened_anew(fs), fs.ops.counters.cache["open_hit"]) == (opened, hits + 1)
        for value in (7, 9):
            fs.write(CHUNK, bytes([value]) * 16)
            assert fs.read(CHUNK) == bytes([value]) * 16
        fs.unlink(CHUNK)
        assert not fs.exists(CHUNK)
        assert fs.read("c/0/002/0/000") == bytes(range(32, 48))


def test_when_the_watch_ends_every_chunk_the_kernel_holds_is_read_anew(rows):
    with in_process(str(rows)) as fs:
        fs.watch_starts()
        assert fs.read(CHUNK) == bytes(range(16, 32))
        inode, parent = fs.inode(CHUNK), fs.inode("c/0/001/0")
        with (mock.patch.object(pyfuse3, "invalidate_inode") as attributes,
              mock.patch.object(pyfuse3, "invalidate_entry") as names):
            fs.watch_ends()
        # Its version's pages stay with its inode; the name leads to a fresh one.
        assert attributes.call_args_list == [mock.call(inode, True)]
        assert names.call_args_list == [mock.call(parent, b"000")]
        opened = _opened_anew(fs)
        assert fs.read(CHUNK) == bytes(range(16, 32))
        assert fs.inode(CHUNK) != inode
        assert _opened_anew(fs) > opened  # not the chunk kept open
