"""Stores are not trusted: symlinks never lead a mount out of the store, special files are
never opened, and the mount keeps serving (issue 21, points 2 and 3).

Arrays are mounted with ``--layout source`` so a chunk's file is at its own key; the rules are
the local backend's and hold for every view.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import threading
import zlib
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import ZstdCodec

import zarrfuse
from tests.cli.operating import stats
from tests.mounting import ZARRFUSE, daemon_pid, is_mounted, mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

SECRET = b"outside the store: never to be served" * 10


def _array(root: Path, **kwargs) -> zarr.Array:
    array = zarr.create_array(root, shape=(4, 8), chunks=(2, 2), dtype="u1", compressors=None,
                              fill_value=0, **kwargs)
    array[...] = np.arange(32, dtype="u1").reshape(4, 8)
    return array


def _chunk(root: Path, *coords: int) -> Path:
    return root.joinpath("c", *map(str, coords))


def _errno_of(action) -> int | None:
    try:
        action()
    except OSError as e:
        return e.errno
    return None


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the store, with a file the daemon could read."""
    where = tmp_path / "outside"
    where.mkdir()
    (where / "secret").write_bytes(SECRET)
    (where / "0").write_bytes(SECRET)
    return where


def test_symlinks_leading_out_are_absent_and_those_inside_are_their_targets(tmp_path, outside):
    store = tmp_path / "a.zarr"
    _array(store)
    os.remove(_chunk(store, 0, 1))
    os.symlink(outside / "secret", _chunk(store, 0, 1))  # absolute, out
    os.remove(_chunk(store, 0, 2))
    os.symlink("../../../outside/secret", _chunk(store, 0, 2))  # relative, out
    os.remove(_chunk(store, 1, 3))
    os.symlink("../0/0", _chunk(store, 1, 3))  # relative, in
    os.remove(_chunk(store, 1, 2))
    os.symlink(_chunk(store, 0, 0), _chunk(store, 1, 2))  # absolute, in
    inside = _chunk(store, 0, 0).read_bytes()
    with mounted(store, tmp_path / "mnt", "--read-only", "--layout", "source") as mnt:
        for leading_out in ("0/1", "0/2"):
            path = mnt / "c" / leading_out
            assert _errno_of(lambda p=path: p.read_bytes()) == errno.ENOENT
            assert _errno_of(lambda p=path: os.stat(p)) == errno.ENOENT
        names = sorted(os.listdir(mnt / "c" / "0"))
        assert "1" not in names and "2" not in names and "0" in names
        assert (mnt / "c" / "1" / "3").read_bytes() == inside
        assert (mnt / "c" / "1" / "2").read_bytes() == inside
        assert {"2", "3"} <= set(os.listdir(mnt / "c" / "1"))
        # zarr through the mount: chunks leading out read as the fill value, not the secret
        values = zarr.open_array(mnt, mode="r")[...]
        assert (values[0:2, 2:6] == 0).all()
    assert (outside / "secret").read_bytes() == SECRET


def test_writes_and_removals_never_reach_outside(tmp_path, outside):
    store = tmp_path / "a.zarr"
    _array(store)
    for name in os.listdir(store / "c" / "1"):
        os.remove(store / "c" / "1" / name)
    os.rmdir(store / "c" / "1")
    os.symlink(outside, store / "c" / "1")  # a chunk directory that leads out
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    with mounted(store, tmp_path / "mnt", "--layout", "source") as mnt:
        target = mnt / "c" / "1" / "0"
        assert _errno_of(lambda: os.unlink(target)) in (errno.ENOENT, errno.EACCES)
        assert _errno_of(lambda: target.write_bytes(b"x" * 4)) in (errno.ENOENT, errno.EACCES)
        (mnt / "c" / "0" / "0").write_bytes(b"\x07" * 4)  # the rest of the mount still works
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    assert _chunk(store, 0, 0).read_bytes() == b"\x07" * 4


def test_a_group_child_leading_out_is_not_shown(tmp_path, outside):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    _array(tmp_path / "g.zarr" / "inside")
    _array(outside / "elsewhere")
    os.symlink(outside / "elsewhere", tmp_path / "g.zarr" / "linked")
    assert group is not None
    with mounted(tmp_path / "g.zarr", tmp_path / "mnt", "--read-only") as mnt:
        assert "inside" in os.listdir(mnt)
        assert "linked" not in os.listdir(mnt)
        assert _errno_of(lambda: os.stat(mnt / "linked")) == errno.ENOENT


def test_symlink_root_widens_where_links_may_lead(tmp_path):
    """A DataLad/git-annex-like dataset: the store's chunks are symlinks into the dataset."""
    dataset = tmp_path / "dataset"
    store = dataset / "images" / "a.zarr"
    _array(store)
    objects = dataset / ".annex"
    objects.mkdir()
    for i, chunk in enumerate(sorted(p for p in (store / "c").rglob("*") if p.is_file())):
        moved = objects / f"object{i}"
        chunk.rename(moved)
        os.symlink(os.path.relpath(moved, chunk.parent), chunk)
    expected = np.arange(32, dtype="u1").reshape(4, 8)
    with mounted(store, tmp_path / "m1", "--read-only", "--layout", "source") as mnt:
        assert (zarr.open_array(mnt, mode="r")[...] == 0).all()  # nothing outside read
    with mounted(store, tmp_path / "m2", "--read-only", "--layout", "source",
                 "--symlink-root", str(dataset)) as mnt:
        np.testing.assert_array_equal(zarr.open_array(mnt, mode="r")[...], expected)


def test_a_fifo_part_gets_eio_at_once_and_the_mount_keeps_serving(tmp_path):
    store = tmp_path / "p.zarr"
    zarrfuse.create_array(
        store, shape=(4, 8), chunks=(2, 2), dtype="u1", compressors=None,
        storage_transformers=[{"name": "concat-parts", "configuration": {"parts": [
            {"key_suffix": ""}, {"key_suffix": ".tail", "size": 1}]}}],
    )[...] = np.arange(32, dtype="u1").reshape(4, 8)
    fifo = Path(f"{_chunk(store, 0, 1)}.tail")
    os.remove(fifo)
    os.mkfifo(fifo)
    os.remove(_chunk(store, 1, 1))
    os.mkfifo(_chunk(store, 1, 1))  # a FIFO as the main part too
    with mounted(store, tmp_path / "mnt", "--read-only", "--layout", "source") as mnt:
        outcome: dict[str, object] = {}

        def read() -> None:
            outcome["errno"] = _errno_of(lambda: (mnt / "c" / "0" / "1").read_bytes())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(5)  # the deadline: a read that waits on the FIFO's writer fails here
        assert not reader.is_alive(), "the read hung on a FIFO"
        assert outcome["errno"] in (errno.EIO, errno.ENOENT)
        assert _errno_of(lambda: (mnt / "c" / "1" / "1").read_bytes()) in (errno.EIO,
                                                                           errno.ENOENT)
        main = _chunk(store, 0, 0)
        assert (mnt / "c" / "0" / "0").read_bytes() == (
            main.read_bytes() + Path(f"{main}.tail").read_bytes()
        )
    # the FIFOs were never opened, and the unmount above did not hang
    assert fifo.exists() and fifo.is_fifo()


def _errno_within(action, seconds: float = 10) -> int | None:
    """The errno ``action`` fails with, failing the test if it takes over ``seconds``."""
    outcome: dict[str, int | None] = {}
    worker = threading.Thread(target=lambda: outcome.update(errno=_errno_of(action)),
                              daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "hung on a special file"
    return outcome["errno"]


@pytest.mark.parametrize("kind", ["fifo", "socket"])
@pytest.mark.parametrize("view", [(), ("--format", "tiff")])
def test_a_special_file_at_a_chunk_key_is_eio_in_every_view_never_the_fill_value(
    tmp_path, kind, view
):
    """Issue 34 point 5: a FIFO or socket at a plain array's chunk key used to be taken as
    an absent chunk (the fill value, no error); now its file is listed and reading it is
    EIO at once, with one log line, raw and rendered, and through zarr on the mount."""

    store = tmp_path / "a.zarr"
    _array(store)
    chunk = _chunk(store, 1, 1)
    chunk.unlink()
    if kind == "fifo":
        os.mkfifo(chunk)
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(chunk))
    with mounted(store, tmp_path / "mnt", "--read-only", *view) as mnt:
        files = sorted(p for p in mnt.rglob("*") if p.is_file() and p.name != "zarr.json")
        assert len(files) == 8  # every chunk of the grid, the special one included
        special = [p for p in files if _errno_within(p.read_bytes) is not None]
        assert len(special) == 1
        assert _errno_within(special[0].read_bytes) == errno.EIO
        if not view:
            with pytest.raises(Exception):  # noqa: B017 (zarr wraps the EIO its own way)
                zarr.open_array(mnt, mode="r")[...]
        log = run_with_timeout([*ZARRFUSE, "log", mnt], 20).stdout
        assert "not a regular file" in log


def test_a_metadata_document_that_is_a_fifo_or_dev_zero_is_refused_at_once(tmp_path):
    (tmp_path / "mnt").mkdir()
    for name, make in (("fifo", os.mkfifo), ("zero", lambda p: p.symlink_to("/dev/zero"))):
        store = tmp_path / f"{name}.zarr"
        store.mkdir()
        make(store / "zarr.json")
        result = run_with_timeout([*ZARRFUSE, "mount", store, tmp_path / "mnt"], 20,
                                  check=False)  # fails, not hangs, past 20 s
        assert result.returncode != 0
        assert "not a metadata document" in result.stderr
        assert not is_mounted(tmp_path / "mnt")


def test_a_directory_symlink_loop_in_a_group_is_not_walked(tmp_path):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    _array(tmp_path / "g.zarr" / "img")
    (tmp_path / "g.zarr" / "img" / "loop").symlink_to("..")
    del group
    with mounted(tmp_path / "g.zarr", tmp_path / "mnt", "--read-only") as mnt:
        found = run_with_timeout(["find", ".", "-type", "f"], 60, cwd=mnt)
        assert found.returncode == 0
        files = found.stdout.splitlines()
        assert not [f for f in files if "/loop/" in f], files[:5]
        assert len(files) == 1 + 1 + 8  # the two zarr.json and img's chunks


# --- messages and log lines (issue 21, points 8 and 10) --------------------------------------


def test_an_out_of_range_fill_value_is_refused_naming_the_file_and_the_field(tmp_path):
    store = tmp_path / "a.zarr"
    _array(store)
    document = json.loads((store / "zarr.json").read_text())
    document["fill_value"] = 300  # uint8
    (store / "zarr.json").write_text(json.dumps(document))
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout([*ZARRFUSE, "mount", str(store), str(tmp_path / "mnt")], 30,
                              check=False)
    assert result.returncode != 0
    assert "zarr.json" in result.stderr and "fill_value 300" in result.stderr, result.stderr
    assert "OverflowError:" not in result.stderr.splitlines()[0][:20]
    assert not is_mounted(tmp_path / "mnt")


def test_a_chunk_that_does_not_decode_is_eio_with_one_log_line(tmp_path):
    store = tmp_path / "z.zarr"
    zarr.create_array(store, shape=(8, 8), chunks=(4, 4), dtype="u1", fill_value=0,
                      compressors=[ZstdCodec(level=1)])[...] = 5
    _chunk(store, 0, 1).write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 10)  # a broken frame
    log = tmp_path / "mount.log"
    with mounted(store, tmp_path / "mnt", "--format", "tiff", "--read-only",
                 "--log-file", str(log)) as mnt:
        files = sorted(mnt.rglob("*.tiff"))
        broken = [f for f in files if _errno_of(f.read_bytes) == errno.EIO]
        assert len(broken) == 1 and len(files) == 4
    lines = [line for line in log.read_text().splitlines() if "does not decode" in line]
    assert len(lines) >= 1 and all("(0, 1)" in line for line in lines), log.read_text()
    assert "Traceback" not in log.read_text()


def test_a_name_that_is_not_utf8_reaches_the_log(tmp_path):
    store = tmp_path / "a.zarr"
    _array(store)
    log = tmp_path / "mount.log"
    with mounted(store, tmp_path / "mnt", "--layout", "source", "--log-file", str(log)) as mnt:
        name = os.fsencode(mnt / "c") + b"/.\xff\xfe-partial.tmp"  # a scratch file
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"left behind")
        os.close(fd)
    text = log.read_text(encoding="utf-8", errors="strict")
    assert "Logging error" not in text and "UnicodeEncodeError" not in text, text
    assert any("scratch file" in line and "\\udcff" in line for line in text.splitlines()), text


# --- chunks too large to render (issue 21, point 5) ------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_rendered_file_of_a_1_gib_chunk_is_sized_without_decoding_it(tmp_path):
    store = tmp_path / "big.zarr"
    zarr.create_array(store, shape=(32768, 32768), chunks=(32768, 32768), dtype="u1",
                      fill_value=0)  # one 1 GiB chunk, not stored
    with mounted(store, tmp_path / "mnt", "--format", "tiff", "--read-only") as mnt:
        (tiff,) = list(mnt.rglob("*.tiff"))
        size = tiff.stat().st_size
        assert size > 1 << 30
        assert stats(mnt)["counters"].get("decoded", {}).get("chunks", 0) == 0
        assert _rss_mb(daemon_pid(mnt)) < 400


def test_an_array_whose_chunks_are_too_large_to_render_is_left_out(tmp_path):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    group.create_array("small", shape=(8, 8), chunks=(4, 4), dtype="u1")[...] = 1
    group.create_array("large", shape=(64, 64), chunks=(64, 64), dtype="u1")[...] = 2
    log = tmp_path / "mount.log"
    with mounted(tmp_path / "g.zarr", tmp_path / "mnt", "--format", "tiff", "--read-only",
                 "--max-chunk-bytes", "1000", "--log-file", str(log)) as mnt:
        assert list((mnt / "small").rglob("*.tiff"))
        assert not (mnt / "large").exists() or not list((mnt / "large").rglob("*.tiff"))
    lines = [line for line in log.read_text().splitlines() if "too large to render" in line]
    assert len(lines) == 1 and "large" in lines[0], log.read_text()
    result = run_with_timeout(
        [*ZARRFUSE, "mount", str(tmp_path / "g.zarr" / "large"), str(tmp_path / "mnt"),
         "--format", "tiff", "--max-chunk-bytes", "1000"], 30, check=False)
    assert result.returncode != 0 and "too large to render" in result.stderr


# --- decompression bombs (issue 21, point 6) -------------------------------------------------


def test_a_decompression_bomb_is_refused_before_it_is_allocated(tmp_path):
    """A 4 KiB chunk stored as a zstd frame of 512 MiB of zeros (about 16 KiB): reading it
    rendered, or writing it through a raw mount, is refused (EIO) and the daemon stays small."""
    store = tmp_path / "z.zarr"
    zarr.create_array(store, shape=(128, 64), chunks=(64, 64), dtype="u1", fill_value=0,
                      compressors=[ZstdCodec(level=1)])[...] = 3
    bomb = numcodecs.Zstd(level=1).encode(bytes(512 << 20))
    assert len(bomb) < 64 << 10
    _chunk(store, 1, 0).write_bytes(bomb)
    log = tmp_path / "mount.log"
    with mounted(store, tmp_path / "m1", "--format", "tiff", "--read-only",
                 "--log-file", str(log)) as mnt:
        files = sorted(mnt.rglob("*.tiff"))
        assert [_errno_of(f.read_bytes) for f in files] == [None, errno.EIO]
        assert _rss_mb(daemon_pid(mnt)) < 300
    assert "declares 536870912 decoded bytes" in log.read_text()
    _chunk(store, 1, 0).unlink()
    with mounted(store, tmp_path / "m2", "--layout", "source") as mnt:
        assert _errno_of(lambda: (mnt / "c" / "1" / "0").write_bytes(bomb)) == errno.EIO
        assert _rss_mb(daemon_pid(mnt)) < 300
    assert not _chunk(store, 1, 0).exists()


def _streamed_bomb(kind: str, size: int) -> bytes:
    """``size`` zero bytes as a stream that declares no decoded size, made in windows (the
    test itself stays small): a zstd frame from the zstd tool reading a pipe, a gzip member."""
    if kind == "zstd":
        zeros = subprocess.Popen(["head", "-c", str(size), "/dev/zero"], stdout=subprocess.PIPE)
        frame = subprocess.run(["zstd", "-1", "-c"], stdin=zeros.stdout, capture_output=True,
                               check=True).stdout
        zeros.wait()
        return frame
    packer, window = zlib.compressobj(1, wbits=31), bytes(1 << 20)
    return b"".join(packer.compress(window) for _ in range(size >> 20)) + packer.flush()


@pytest.mark.parametrize("kind", ["zstd-v3", "gzip-v2"])
def test_a_streamed_bomb_is_refused_in_bounded_memory(tmp_path, kind):
    """512 MiB of zeros as a stream without a declared size (zstd written by a streaming
    writer; gzip, what Zarr v2 writers use): the rendered chunk and the whole image give EIO
    with one line each, and the daemon never holds the bomb."""
    store = tmp_path / "b.zarr"
    codec, v2 = (ZstdCodec(level=1), False) if kind == "zstd-v3" else (numcodecs.GZip(1), True)
    zarr.create_array(store, shape=(128, 64), chunks=(64, 64), dtype="u1", fill_value=0,
                      compressors=[codec], zarr_format=2 if v2 else 3)[...] = 3
    bomb = _streamed_bomb(kind.split("-")[0], 512 << 20)
    (store / ("1.0" if v2 else "c/1/0")).write_bytes(bomb)
    log = tmp_path / "mount.log"
    with mounted(store, tmp_path / "m", "--format", "tiff", "--read-only",
                 "--log-file", str(log)) as mnt:
        files = sorted(mnt.rglob("*.tiff"))
        assert [_errno_of(f.read_bytes) for f in files] == [None, errno.EIO]
        assert np.all(tifffile.imread(files[0]) == 3)
        assert _rss_mb(daemon_pid(mnt)) < 300
    assert "decodes to more than the chunk can hold" in log.read_text()
    with mounted(store, tmp_path / "w", "--format", "ome-tiff", "--read-only") as mnt:
        whole = next(mnt.rglob("*.tif*"))
        assert _errno_of(whole.read_bytes) == errno.EIO
        assert _rss_mb(daemon_pid(mnt)) < 300
