"""A writable mount while its store watch runs (issue 35, point 1), in process: chunk files
are kept as long as on a read-only mount (the kernel's timeouts, chunks kept open), each
commit drops what was kept of its chunk, a file being written keeps the short timeout, and
when the watch fails the mount stops relying on it. Through the kernel, with real changes
by other programs: ``tests/fuse/test_mount_follows_store.py``."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pyfuse3
import pytest
import tifffile
import trio
import zarr

from tests.inprocess import CTX, in_process
from tests.picture_paths import tile_path
from zarrfuse.fuse.cache_times import READ_ONLY_TIMEOUT, WRITABLE_TIMEOUT
from zarrfuse.storage.local import LocalBackend

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


# --- answers asked across a change ------------------------------------------------------------
# While the watch runs, what the mount learnt of the store is kept until a change is reported.
# An answer asked before another program's change and returned after the watch reported it
# must not be kept: it may say what the store held before.


@pytest.fixture
def six_of_eight(tmp_path) -> Path:
    """A 1-D array of 8 chunks of 4 bytes in one store directory ``c``; 6 and 7 not stored."""
    path = tmp_path / "six"
    array = zarr.create_array(path, shape=(32,), chunks=(4,), dtype="u1", compressors=None,
                              fill_value=0)
    array[:24] = 1
    return path


class Gate:
    """Holds one call of a real ``LocalBackend`` method, after it answered, until opened:
    the store's answer is then older than what happens meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str, arg: str) -> None:
        self.answered, self.go = threading.Event(), threading.Event()
        self.armed = False
        real = getattr(LocalBackend, method)

        def held(backend: LocalBackend, first: object, *rest: object) -> object:
            out = real(backend, first, *rest)
            if self.armed and first == arg:
                self.armed = False
                self.answered.set()
                self.go.wait(WAIT)
            return out

        monkeypatch.setattr(LocalBackend, method, held)

    @contextmanager
    def across(self, request: Callable[[], object]) -> Iterator[None]:
        """``request`` (a call into the mount) runs until the store answered it; the block
        runs while the answer is held, then the request ends."""
        self.armed = True
        worker = threading.Thread(target=request, daemon=True)
        worker.start()
        try:
            assert self.answered.wait(WAIT), "the store was not asked"
            yield
        finally:
            self.go.set()
            worker.join(WAIT)
        assert not worker.is_alive()


WAIT = 10.0


def _another_program_stores(fs, store: Path, key: str, data: bytes) -> None:
    """Writes ``key`` in the store (a new file, renamed over any old one) and reports it, as
    the watch would."""
    scratch = store / (key + ".new")
    scratch.write_bytes(data)
    os.replace(scratch, store / key)
    trio.from_thread.run(fs.fs.apply_store_changes, {key}, trio_token=fs._token)


def _quiet(call: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(OSError):
            call()
    return run


def test_a_listing_under_way_when_a_chunk_is_stored_is_not_kept(six_of_eight, monkeypatch):
    gate = Gate(monkeypatch, "list_stats", "c")
    with in_process(str(six_of_eight)) as fs:
        fs.watch_starts()
        assert fs.listdir("c/0") == [f"00{i}" for i in range(6)]
        _another_program_stores(fs, six_of_eight, "c/0", bytes([5]) * 4)  # listed anew
        with gate.across(lambda: fs.listdir("c/0")):
            _another_program_stores(fs, six_of_eight, "c/6", bytes([2]) * 4)
        assert fs.listdir("c/0") == [f"00{i}" for i in range(7)]
        assert fs.read("c/0/006") == bytes([2]) * 4


def test_a_stat_under_way_when_a_chunk_is_stored_is_not_kept(six_of_eight, monkeypatch):
    gate = Gate(monkeypatch, "stat", "c/6")
    with in_process(str(six_of_eight)) as fs:
        fs.watch_starts()
        with gate.across(_quiet(lambda: fs.stat("c/0/006"))):  # absent, as the store answers
            _another_program_stores(fs, six_of_eight, "c/6", bytes([2]) * 4)
        assert fs.size("c/0/006") == 4
        assert fs.read("c/0/006") == bytes([2]) * 4


def test_a_chunk_opened_across_its_change_is_not_kept_open(six_of_eight, monkeypatch):
    monkeypatch.setattr(LocalBackend, "open_reader_nowait", lambda *_: None)  # in a thread
    gate = Gate(monkeypatch, "open_reader", ["c/1"])
    with in_process(str(six_of_eight)) as fs:
        fs.watch_starts()
        seen: list[bytes] = []
        with gate.across(lambda: seen.append(fs.read("c/0/001"))):
            _another_program_stores(fs, six_of_eight, "c/1", bytes([3]) * 4)
        assert seen == [bytes([1]) * 4]  # opened before the change: its version
        assert fs.read("c/0/001") == bytes([3]) * 4


def test_an_index_under_way_when_a_row_is_stored_is_not_kept(tmp_path, monkeypatch):
    """Which rows are stored comes from the store's subdirectories (``stored_set``)."""
    path = tmp_path / "rows"
    array = zarr.create_array(path, shape=(8, 16), chunks=(1, 16), dtype="u1",
                              compressors=None, fill_value=0)
    array[:6] = 1
    gate = Gate(monkeypatch, "list_subdirs", "c")
    with in_process(str(path)) as fs:
        fs.watch_starts()
        with gate.across(lambda: fs.listdir("c/0")):
            (path / "c" / "6").mkdir()
            _another_program_stores(fs, path, "c/6/0", bytes([2]) * 16)
        assert fs.listdir("c/0") == [f"00{i}" for i in range(7)]
        assert fs.read("c/0/006/0/000") == bytes([2]) * 16


def test_a_whole_image_decoded_across_a_change_is_not_kept(tmp_path, monkeypatch):
    path = tmp_path / "a"
    zarr.create_array(path, data=np.full((64, 64), 1, dtype="<u2"), chunks=(64, 64),
                      compressors=None)
    gate = Gate(monkeypatch, "read_all", "c/0/0")
    with in_process(str(path), format="ome-tiff", read_only=True) as fs:
        fs.watch_starts()
        seen: list[np.ndarray] = []
        with gate.across(lambda: seen.append(tifffile.imread(io.BytesIO(fs.read("a.ome.tif"))))):
            _another_program_stores(fs, path, "c/0/0", np.full(64 * 64, 7, "<u2").tobytes())
        assert (tifffile.imread(io.BytesIO(fs.read("a.ome.tif"))) == 7).all()


def test_a_whole_image_handle_keeps_the_version_it_opened(tmp_path):
    """One version of each tile per read (issue 52): a handle opened before another
    program changed a chunk goes on reading the image as it was (the kernel keeps its
    inode's pages, and fills the rest of a tile it has part of from it); a new open reads
    the change, through a new inode."""
    path = tmp_path / "a"
    zarr.create_array(path, data=np.full((64, 128), 1, dtype="<u2"), chunks=(64, 64),
                      compressors=None)
    with in_process(str(path), format="ome-tiff", read_only=True) as fs:
        fs.watch_starts()
        before = fs.open("a.ome.tif", os.O_RDONLY)
        assert (tifffile.imread(io.BytesIO(fs.pread(before, 1 << 20, 0))) == 1).all()
        _another_program_stores(fs, path, "c/0/0", np.full(64 * 64, 7, "<u2").tobytes())
        assert (tifffile.imread(io.BytesIO(fs.pread(before, 1 << 20, 0))) == 1).all()
        after = fs.open("a.ome.tif", os.O_RDONLY)
        assert fs._inodes[after] != fs._inodes[before]
        picture = tifffile.imread(io.BytesIO(fs.pread(after, 1 << 20, 0)))
        assert (picture[:, :64] == 7).all() and (picture[:, 64:] == 1).all()
        fs.close(before)
        fs.close(after)


def test_the_kernel_keeps_no_entry_of_a_whole_images_name(tmp_path):
    """A change gives a whole image a new inode, and the kernel is not told: were it to keep
    the name's entry (an hour on a read-only mount), a program opening the file again by its
    name would be sent to the old version for LOOKUP_TO_OPEN (2 s) after its last lookup.
    With no entry kept, each open looks the name up and gets the newest version."""
    path = tmp_path / "a"
    zarr.create_array(path, data=np.full((64, 64), 1, dtype="<u2"), chunks=(64, 64),
                      compressors=None)
    with in_process(str(path), format="ome-tiff", read_only=True) as fs:
        fs.watch_starts()
        assert _timeouts(fs, "a.ome.tif") == (0, READ_ONLY_TIMEOUT)


def _entry(fs, path: str) -> pyfuse3.EntryAttributes:
    parent, _, name = path.rpartition("/")
    return fs._call(fs.ops.lookup, fs.inode(parent), name.encode(), CTX)


@pytest.mark.parametrize("read_only", [False, True])
def test_the_kernel_keeps_no_answer_given_across_a_change(six_of_eight, monkeypatch,
                                                          read_only):
    """The kernel forgets a changed chunk's name when the change is reported; a lookup
    answered after that from what the store said before must not be kept (for an hour, on
    a read-only mount or a watched writable one): not its size, nor an absence."""
    gate = Gate(monkeypatch, "stat", "c/1")
    with in_process(str(six_of_eight), read_only=read_only) as fs:
        fs.watch_starts()
        answers: list[pyfuse3.EntryAttributes] = []
        with gate.across(lambda: answers.append(_entry(fs, "c/0/001"))):
            _another_program_stores(fs, six_of_eight, "c/1", bytes([3]) * 8)
        gone = Gate(monkeypatch, "stat", "c/7")
        with gone.across(lambda: answers.append(_entry(fs, "c/0/007"))):
            _another_program_stores(fs, six_of_eight, "c/7", bytes([4]) * 4)
        old, absent = answers
        assert old.st_size == 4 and (old.entry_timeout, old.attr_timeout) == (0, 0)
        assert absent.st_ino == 0 and absent.entry_timeout == 0
        new = _entry(fs, "c/0/001")
        assert new.st_size == 8 and new.entry_timeout == READ_ONLY_TIMEOUT
        assert _entry(fs, "c/0/007").st_size == 4


@pytest.mark.parametrize("read_only", [False, True])
def test_a_directory_moved_out_of_the_store_takes_its_chunks(rows, tmp_path, read_only):
    """The watch reports a directory moved out (``mv c/3 elsewhere``) as the directory
    alone: what the mount learnt of the chunks in it (listings, sizes, chunks kept open,
    the kernel's names) is forgotten all the same."""
    with in_process(str(rows), read_only=read_only) as fs:
        fs.watch_starts()
        assert fs.read("c/0/003/0/000") == bytes(range(48, 64))
        assert "003" in fs.listdir("c/0")
        os.rename(rows / "c" / "3", tmp_path / "moved")
        trio.from_thread.run(fs.fs.apply_store_changes, {"c/3"}, trio_token=fs._token)
        assert "003" not in fs.listdir("c/0")
        assert not fs.exists("c/0/003/0/000")
        assert fs.read("c/0/004/0/000") == bytes(range(64, 80))


def test_a_whole_image_loses_the_rows_moved_out_of_the_store(tmp_path):
    path = tmp_path / "a"
    zarr.create_array(path, data=np.full((64, 64), 1, dtype="<u2"), chunks=(16, 64),
                      compressors=None, fill_value=0)
    with in_process(str(path), format="ome-tiff", read_only=True) as fs:
        fs.watch_starts()
        assert (tifffile.imread(io.BytesIO(fs.read("a.ome.tif"))) == 1).all()
        os.rename(path / "c" / "2", tmp_path / "moved")
        trio.from_thread.run(fs.fs.apply_store_changes, {"c/2"}, trio_token=fs._token)
        picture = tifffile.imread(io.BytesIO(fs.read("a.ome.tif")))
        assert (picture[32:48] == 0).all() and (picture[:32] == 1).all()


@pytest.mark.parametrize(("written", "directories", "others"), [
    ({"zarr_format": 3}, ["c", "c/3"], ["c/3/0", "c/9", "zarr.json", "c/3/0.tmp", "d"]),
    ({"zarr_format": 3, "chunk_key_encoding": {"name": "default", "separator": "."}},
     [], ["c", "c.3", "c.3.0"]),
    ({"zarr_format": 2}, [], ["3", "3.0", ".zarray"]),
    ({"zarr_format": 2, "chunk_key_encoding": {"name": "v2", "separator": "/"}},
     ["3"], ["3/0", "8", ".zarray"]),
])
def test_the_directories_chunk_keys_pass_through(tmp_path, written, directories, others):
    """Which store keys name a directory of chunks: one that went away takes its chunks."""
    path = tmp_path / "a"
    zarr.create_array(path, shape=(8, 16), chunks=(1, 16), dtype="u1", **written)
    with in_process(str(path), read_only=True) as fs:
        stored = fs.fs.namespace.node(pyfuse3.ROOT_INODE).array.stored
        assert [k for k in directories + others if stored.on_chunk_path(k)] == directories


def test_a_rendered_tile_of_a_row_moved_out_shows_the_fill(tmp_path):
    """A TIFF view renders each tile once and keeps it (and renders the next ones ahead):
    the tiles of a directory that went away show the fill value, not the kept picture."""
    path = tmp_path / "a"
    zarr.create_array(path, data=np.full((64, 64), 9, dtype="u1"), chunks=(16, 16),
                      fill_value=0)
    with in_process(str(path), format="tiff", read_only=True) as fs:
        fs.watch_starts()
        tiles = [tile_path(2, col, "tiff") for col in range(4)]
        assert (tifffile.imread(io.BytesIO(fs.read(tiles[0]))) == 9).all()  # ahead: the rest
        os.rename(path / "c" / "2", tmp_path / "moved")
        trio.from_thread.run(fs.fs.apply_store_changes, {"c/2"}, trio_token=fs._token)
        for tile in tiles:
            assert (tifffile.imread(io.BytesIO(fs.read(tile))) == 0).all(), tile
        assert (tifffile.imread(io.BytesIO(fs.read(tile_path(1, 0, "tiff")))) == 9).all()


def test_a_chunk_opened_while_its_directory_goes_is_not_kept_open(rows, tmp_path,
                                                                  monkeypatch):
    """The open of a chunk not kept yet, under way when its row was moved out of the store,
    is as old as the chunks dropped then: kept open, it would be read again once another
    row was put in that place."""
    monkeypatch.setattr(LocalBackend, "open_reader_nowait", lambda *_: None)  # in a thread
    gate = Gate(monkeypatch, "open_reader", ["c/3/0"])
    with in_process(str(rows), read_only=True) as fs:
        fs.watch_starts()
        assert fs.size("c/0/003/0/000") == 16
        with gate.across(_quiet(lambda: fs.read("c/0/003/0/000"))):
            os.rename(rows / "c" / "3", tmp_path / "moved")
            trio.from_thread.run(fs.fs.apply_store_changes, {"c/3"}, trio_token=fs._token)
        (tmp_path / "new" / "0").parent.mkdir()
        (tmp_path / "new" / "0").write_bytes(bytes([9]) * 16)
        os.rename(tmp_path / "new", rows / "c" / "3")
        trio.from_thread.run(fs.fs.apply_store_changes, {"c/3"}, trio_token=fs._token)
        assert fs.read("c/0/003/0/000") == bytes([9]) * 16


@pytest.mark.parametrize("read_only", [False, True])
def test_a_chunk_stored_again_where_the_kernel_was_told_absent_shows(six_of_eight, read_only):
    """``rm`` then a new chunk under the same name (issue 52, point 3): between them the
    kernel was answered "no such file" for the name, which it keeps (for an hour on a
    read-only mount, or a watched writable one), while it still holds the chunk's inode
    (it keeps inodes past their names: no forget comes). The new chunk must make the kernel
    forget that absence, though the mount still knows the inode (before: only the inode's
    pages and size were dropped, and the name stayed absent). Through the kernel:
    ``tests/fuse/test_mount_follows_store.py``."""
    chunk = six_of_eight / "c" / "1"
    with in_process(str(six_of_eight), read_only=read_only) as fs:
        fs.watch_starts()
        assert fs.size("c/0/001") == 4
        parent = fs.inode("c/0")
        chunk.unlink()
        trio.from_thread.run(fs.fs.apply_store_changes, {"c/1"}, trio_token=fs._token)
        absent = _entry(fs, "c/0/001")
        assert absent.st_ino == 0 and absent.entry_timeout > 0  # the kernel keeps it
        chunk.write_bytes(bytes([7]) * 4)
        with mock.patch.object(pyfuse3, "invalidate_entry") as names:
            trio.from_thread.run(fs.fs.apply_store_changes, {"c/1"}, trio_token=fs._token)
        assert mock.call(parent, b"001") in names.call_args_list
        assert fs.read("c/0/001") == bytes([7]) * 4
