"""Edits reach every view (issue 31, point 5): a mount of a local store shows chunks other
programs change (zarr-python, another mount) within about a second, whatever its view,
the read-only whole image included; ``--no-watch`` keeps the old caching."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.cli.operating import count, stats
from tests.mounting import MountClock, mounted, wait_for
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

BOUND = 3.0
"""Seconds within which a change must show (documented: about one second)."""


def _within(check: Callable[[], bool], seconds: float = BOUND) -> float | None:
    """How long until ``check()`` held (None: not within ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def _image(path: Path) -> np.ndarray:
    with tifffile.TiffFile(path) as tif:
        return tif.series[0].asarray()


def test_a_plane_saved_through_one_mount_shows_in_the_whole_image_of_another(tmp_path):
    """GIMP's save through a ``--format tiff`` mount, then the read-only ``--format
    ome-tiff`` mount of the same store: its whole image and the ImageJ strip file show the
    new pixels, without remounting."""
    data = np.random.default_rng(1).integers(0, 255, (64, 96), dtype="u1")
    zarr.create_array(tmp_path / "img", data=data, chunks=(32, 32),
                      dimension_names=("y", "x"))
    edited = np.full((32, 32), 7, dtype="u1")
    expected = data.copy()
    expected[32:, 64:] = edited
    with (mounted(tmp_path / "img", tmp_path / "whole", "--format", "ome-tiff") as whole,
          mounted(tmp_path / "img", tmp_path / "tiles", "--format", "tiff") as tiles):
        np.testing.assert_array_equal(_image(whole / "img.ome.tif"), data)  # cached now
        out = io.BytesIO()
        tifffile.imwrite(out, edited)
        (tiles / tile_path(1, 2, "tiff")).write_bytes(out.getvalue())
        for name in ("img.ome.tif", "img.imagej.tif"):
            took = _within(lambda n=name: np.array_equal(_image(whole / n), expected))
            assert took is not None, f"{name} still shows the old pixels after {BOUND} s"


def test_a_chunk_zarr_python_rewrites_shows_in_a_read_only_raw_mount(tmp_path):
    """A read-only raw mount keeps chunk pages and open chunks for its life; a chunk
    zarr-python rewrites (in place) shows all the same."""
    zarr.create_array(tmp_path / "a", data=np.ones((8, 8), "u1"), chunks=(4, 4),
                      compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only") as mnt:
        chunk = mnt / "c/0/000/0/001"
        assert chunk.read_bytes() == bytes([1]) * 16
        zarr.open_array(tmp_path / "a", mode="r+")[:4, 4:] = 9  # in place, same inode
        assert _within(lambda: chunk.read_bytes() == bytes([9]) * 16) is not None
        assert (mnt / "c/0/000/0/000").read_bytes() == bytes([1]) * 16


@pytest.mark.parametrize("mode", [("--read-only",), ()], ids=["read-only", "writable"])
def test_a_chunk_stored_in_a_new_store_directory_shows(tmp_path, mode):
    """zarr-python makes ``c/2/`` and stores ``c/2/0`` in it at once, before the watch can
    watch the new directory: only the directory is reported, and the mount, which keeps
    its listings while it watches, must list again. The kernel had been told the chunk's
    directory is absent, which a read-only mount lets it remember for an hour: it must
    forget that too."""
    zarr.create_array(tmp_path / "a", data=np.zeros((4, 8), "u1"), chunks=(1, 8),
                      fill_value=0, compressors=None)
    zarr.open_array(tmp_path / "a", mode="r+")[0] = 1
    assert not (tmp_path / "a" / "c/2").exists()
    with mounted(tmp_path / "a", tmp_path / "mnt", *mode) as mnt:
        chunk = mnt / "c/0/002/0/000"
        assert sorted(p.name for p in (mnt / "c/0").iterdir()) in (["000"], [f"00{i}" for i in
                                                                             range(4)])
        assert not chunk.exists() or chunk.read_bytes() in (b"", bytes(8))
        zarr.open_array(tmp_path / "a", mode="r+")[2] = 7
        assert _within(lambda: chunk.exists() and chunk.read_bytes() == bytes([7]) * 8)


def test_a_chunk_stored_where_a_read_only_mount_said_absent_shows(tmp_path):
    """The kernel remembers a read-only mount's "no such file" for an hour; a chunk
    another program then stores under that name shows all the same."""
    zarr.create_array(tmp_path / "a", data=np.zeros((1, 64), "u1"), chunks=(1, 8),
                      fill_value=0, compressors=None)
    array = zarr.open_array(tmp_path / "a", mode="r+")
    array[0, :8] = 1
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only") as mnt:
        chunk = mnt / "c/0/000/0/003"
        assert (mnt / "c/0/000/0/000").read_bytes() == bytes([1]) * 8
        assert not chunk.exists()  # remembered as absent
        array[0, 24:32] = 3
        assert _within(lambda: chunk.exists() and chunk.read_bytes() == bytes([3]) * 8)


def test_without_watching_a_read_only_mount_keeps_what_it_read(tmp_path, monkeypatch):
    """No watch runs (nothing will tell the mount), and a day on the mount's clock later
    it still shows what it read."""
    clock = MountClock(monkeypatch, tmp_path)
    zarr.create_array(tmp_path / "a", data=np.ones((8, 8), "u1"), chunks=(4, 4),
                      compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only", "--no-watch") as mnt:
        chunk = mnt / "c/0/000/0/001"
        assert chunk.read_bytes() == bytes([1]) * 16
        zarr.open_array(tmp_path / "a", mode="r+")[:4, 4:] = 9
        clock.ahead(86400)
        assert chunk.read_bytes() == bytes([1]) * 16
        assert stats(mnt)["watching"] is None


# --- a writable mount while it watches the store (issue 35, point 1) ----------------------


def _watching(mnt: Path) -> bool:
    """The mount says its store watch runs (chunk files are then kept long)."""
    return stats(mnt)["watching"] is True


def _read(path: Path | str, dir_fd: int | None = None) -> bytes:
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)


def test_a_writable_mount_keeps_unchanged_chunk_files_while_it_watches(tmp_path, monkeypatch):
    """A second look at unchanged files, past the writable mount's one-second timeout (the
    mount's clock moved on; the kernel was told to keep for 0 s what it keeps for that TTL): the
    kernel still knows every name and size, and each chunk is still open, so the daemon
    sees one open per file and nothing else (before: a lookup per file, and every chunk
    opened again). Read with open, read and close only: a writable mount's reads make the
    kernel ask for the access time again at the next fstat, on any FUSE filesystem."""
    clock = MountClock(monkeypatch, tmp_path)
    data = np.arange(8 * 64, dtype="u1").reshape(8, 64)
    zarr.create_array(tmp_path / "a", data=data, chunks=(1, 64), compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        files = [mnt / f"c/0/00{row}/0/000" for row in range(8)]
        assert [f.read_bytes() for f in files] == [bytes(row) for row in data]
        clock.ahead(2)  # past the TTL of a writable mount that does not watch
        with _below(mnt / "c/0") as below:
            before = stats(mnt)["counters"]
            assert [_read(f"00{row}/0/000", below) for row in range(8)] == [
                bytes(row) for row in data]
            after = stats(mnt)["counters"]
    asked = {name: count(after, "requests", name) - count(before, "requests", name)
             for name in ("lookup", "getattr", "open")}
    assert asked["lookup"] == 0 and asked["getattr"] == 0 and asked["open"] == 8, asked
    opened = count(after, "store_requests", "open") - count(before, "store_requests", "open")
    assert opened == 0


def test_a_fresh_writable_mount_keeps_the_files_it_reads_first(tmp_path, monkeypatch):
    """The watch is set up before the mount answers its first request, so it counts from
    that request on: files read at once are kept as long as later ones (before: the first
    second's files got one-second timeouts, and a second pass looked them up again)."""
    clock = MountClock(monkeypatch, tmp_path)
    data = np.arange(8 * 64, dtype="u1").reshape(8, 64)
    zarr.create_array(tmp_path / "a", data=data, chunks=(1, 64), compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        files = [mnt / f"c/0/00{row}/0/000" for row in range(8)]
        assert [_read(f) for f in files] == [bytes(row) for row in data]
        assert _watching(mnt)
        clock.ahead(2)  # past the TTL of a writable mount that does not watch
        with _below(mnt / "c/0") as below:
            before = stats(mnt)["counters"]
            assert [_read(f"00{row}/0/000", below) for row in range(8)] == [
                bytes(row) for row in data]
            after = stats(mnt)["counters"]
    asked = {name: count(after, "requests", name) - count(before, "requests", name)
             for name in ("lookup", "getattr")}
    assert asked["lookup"] == 0 and asked["getattr"] == 0, asked


@pytest.mark.parametrize("ttl", [(), ("--metadata-ttl", "1")], ids=["watched", "ttl-given"])
def test_a_writable_mount_keeps_its_listings_and_still_shows_new_chunks(tmp_path, ttl,
                                                                        monkeypatch):
    """Its store watch set up before it served, a writable mount keeps what it listed past
    its one-second TTL (a second listing asks the store nothing: ``find`` over a big tree
    listed each store directory again every second), and a chunk another program stores
    where none was still shows within about a second. ``--metadata-ttl`` says how long to
    trust a listing: the mount then lists again past it."""
    clock = MountClock(monkeypatch, tmp_path)
    zarr.create_array(tmp_path / "a", data=np.ones((8, 64), "u1"), chunks=(1, 64),
                      fill_value=0, compressors=None)
    array = zarr.open_array(tmp_path / "a", mode="r+")
    array[3] = 0  # the fill value: zarr-python removes the chunk
    assert not (tmp_path / "a" / "c/3/0").exists()
    with mounted(tmp_path / "a", tmp_path / "mnt", *ttl) as mnt:
        directory = mnt / "c/0"
        first = sorted(p.name for p in directory.iterdir())
        chunk = directory / "003" / "0" / "000"
        assert not chunk.exists() or chunk.read_bytes() in (b"", bytes(64))
        clock.ahead(2)  # past the writable listing TTL
        before = stats(mnt)["counters"]
        assert sorted(p.name for p in directory.iterdir()) == first
        after = stats(mnt)["counters"]
        asked = {name: count(after, "store_requests", name) - count(before, "store_requests",
                                                                     name)
                 for name in ("list", "stat")}
        assert asked == {"list": 1 if ttl else 0, "stat": 0}, asked
        array[3] = 5  # another program stores the missing chunk
        assert _within(lambda: chunk.exists() and chunk.read_bytes() == bytes([5]) * 64)


def test_a_writable_mount_shows_a_chunk_another_program_rewrites(tmp_path):
    """Kept long, a chunk file still shows another program's rewrite (zarr-python's, to a
    new size) within about a second, bytes and size, also while a reader holds the version
    it opened (its inode then keeps that size: the name must lead elsewhere)."""
    zarr.create_array(tmp_path / "a", data=np.ones((8, 64), "u1"), chunks=(1, 64))
    stored = tmp_path / "a" / "c/3/0"
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        chunk = mnt / "c/0/003/0/000"
        old = stored.read_bytes()
        with open(chunk, "rb") as reader:
            assert reader.read() == old
            zarr.open_array(tmp_path / "a", mode="r+")[3] = np.random.default_rng(3).integers(
                0, 255, 64, dtype="u1")
            new = stored.read_bytes()
            assert len(new) != len(old)
            assert _within(lambda: chunk.stat().st_size == len(new)) is not None
            assert chunk.read_bytes() == new


def test_a_chunk_saved_through_the_mount_shows_at_once_beside_a_reader(tmp_path):
    """A reader keeps the version it opened; a save through the mount shows to the next
    stat and open at once, on the name the kernel keeps (before: the reader's size, for up
    to a second)."""
    zarr.create_array(tmp_path / "a", data=np.ones((8, 64), "u1"), chunks=(1, 64),
                      compressors=None)
    # Values of any length, as the model of file semantics writes them: no decode check.
    with mounted(tmp_path / "a", tmp_path / "mnt", "--no-verify") as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        chunk = mnt / "c/0/002/0/000"
        with open(chunk, "rb") as reader:
            assert reader.read() == bytes([1]) * 64
            for size in (16, 40, 64):
                chunk.write_bytes(bytes([size]) * size)
                assert os.stat(chunk).st_size == size
                assert chunk.read_bytes() == bytes([size]) * size
            reader.seek(0)
            assert reader.read() == bytes([1]) * 64


@pytest.mark.parametrize("mode", [("--read-only",), ()], ids=["read-only", "writable"])
def test_a_row_moved_out_of_the_store_goes_from_the_mount(tmp_path, mode):
    """``mv c/3 elsewhere``: the watch reports the directory alone, not the chunks in it;
    the mount, which keeps its listings, sizes and open chunks while it watches (and lets
    the kernel keep names for an hour), shows the row gone all the same: not its old bytes
    from a chunk it kept open."""
    data = np.arange(8 * 16, dtype="u1").reshape(8, 16)
    zarr.create_array(tmp_path / "a", data=data, chunks=(1, 16), compressors=None,
                      fill_value=0)
    with mounted(tmp_path / "a", tmp_path / "mnt", *mode) as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        row = mnt / "c/0/003/0/000"
        assert row.read_bytes() == bytes(data[3])  # listed, sized, and kept open
        assert "003" in os.listdir(mnt / "c/0")
        os.rename(tmp_path / "a" / "c" / "3", tmp_path / "moved")
        assert _within(lambda: not row.exists() and "003" not in os.listdir(mnt / "c/0"))
        assert (mnt / "c/0/004/0/000").read_bytes() == bytes(data[4])


@pytest.mark.parametrize("mode", [("--read-only",), ()], ids=["read-only", "writable"])
def test_a_reader_open_across_a_change_leaves_new_opens_the_new_chunk(tmp_path, mode):
    """A viewer holds a chunk file open while another program replaces the chunk. Its
    handle reads on, and its reads fill the kernel's pages of the file's inode: a file
    opened after the change must read the new chunk, not those pages."""
    size = 1 << 20
    zarr.create_array(tmp_path / "a", data=np.full(size, 1, "u1"), chunks=(size,),
                      compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt", *mode) as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        chunk = next(p for p in (mnt / "c").rglob("*") if p.is_file())
        fd = os.open(chunk, os.O_RDONLY)
        try:
            assert os.pread(fd, 4096, 0) == bytes([1]) * 4096
            new = tmp_path / "new"
            new.write_bytes(bytes([2]) * size)
            os.replace(new, tmp_path / "a" / "c" / "0")
            assert _within(lambda: chunk.read_bytes()[:1] == b"\x02")
            assert os.pread(fd, size, 0) == bytes([1]) * size  # its version, in the pages
            assert chunk.read_bytes() == bytes([2]) * size
        finally:
            os.close(fd)


# --- a chunk removed and stored again while readers read it (issue 52, point 3) -----------

GAP = 0.02
"""Seconds between a chunk's removal and its new version, as the issue saw it."""
PACES = (0.0, 0.01, 0.05, 0.1, 0.15, 0.3)
"""Seconds between one cycle's new version and the next removal: the watch then reports
the removal alone, both in one round, or the new version alone (a round's edge falls in
between)."""


@contextmanager
def _below(directory: Path) -> Iterator[int]:
    """A descriptor of ``directory``, to open files below it by a path that does not start
    at the mount's root: the root's attributes are short-lived (a rewritten zarr.json changes
    them), and with a TTL of 0 every walk from the root would ask for them again."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _reading(chunk: Path) -> Iterator[None]:
    """Programs reading ``chunk`` throughout: opening and reading it whole, holding it open
    and reading again, and asking its size (which makes the kernel ask the mount for its
    name again when the chunk is gone). Absent meanwhile is fine; they never stop on it."""
    stop = threading.Event()

    def whole() -> None:
        while not stop.is_set():
            with suppress(OSError):
                chunk.read_bytes()

    def held() -> None:
        while not stop.is_set():
            try:
                fd = os.open(chunk, os.O_RDONLY)
            except OSError:
                continue
            try:
                for _ in range(20):
                    os.pread(fd, 1 << 16, 0)
            except OSError:
                pass
            finally:
                os.close(fd)

    def sized() -> None:
        while not stop.is_set():
            with suppress(OSError):
                chunk.stat()

    readers = [threading.Thread(target=target, daemon=True)
               for target in (whole, whole, whole, held, sized)]
    for reader in readers:
        reader.start()
    try:
        yield
    finally:
        stop.set()
        for reader in readers:
            reader.join(BOUND)
    assert not any(reader.is_alive() for reader in readers), "a reader is stuck in the mount"


def test_a_chunk_removed_and_stored_again_under_readers_shows_the_store(tmp_path):
    """``rm`` of a 64 KiB chunk and a new version 20 ms later, over and over, at paces that
    put the two in one watch round or in two, then once more slowly (the mount showing the
    chunk gone in between), while programs read the file: then the mount shows the stored
    chunk. Before: a read-only mount could answer "no such file" for an hour. The kernel,
    told the name was absent while the chunk was gone, keeps the chunk's inode past that
    name; the mount, which still knew the inode, dropped only its pages when the chunk came
    back, not the absent name."""
    side = 256
    zarr.create_array(tmp_path / "a", data=np.ones((2 * side, 2 * side), "u1"),
                      chunks=(side, side), compressors=None, fill_value=0)
    stored = tmp_path / "a" / "c/1/0"
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only") as mnt:
        assert wait_for(lambda: _watching(mnt), BOUND)
        chunk = mnt / "c/0/001/0/000"
        assert chunk.read_bytes() == bytes([1]) * side * side
        with _reading(chunk):
            for cycle in range(60):
                stored.unlink()
                time.sleep(GAP)
                last = bytes([10 + cycle]) * side * side
                stored.write_bytes(last)
                time.sleep(PACES[cycle % len(PACES)])
            stored.unlink()  # and at a slow pace: the mount shows it gone first
            assert _within(lambda: not chunk.exists()) is not None, "the removal never showed"
            last = bytes([9]) * side * side
            stored.write_bytes(last)

            def shows_the_store() -> bool:
                try:
                    return chunk.read_bytes() == last
                except FileNotFoundError:
                    return False

            took = _within(shows_the_store)
            assert took is not None, (
                f"{chunk} does not show the stored chunk {BOUND} s after its last change")
        assert os.listdir(mnt / "c/0/001/0") == ["000", "001"]
