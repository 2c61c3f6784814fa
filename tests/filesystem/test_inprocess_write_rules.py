"""The rules around saves, in process: which names are scratch files, renames that commit,
and arrays that cannot be written. What needs the kernel (a shell's ``: >``, the attribute
cache, names the VFS refuses) stays in ``tests/fuse/test_mount_write_rules.py``."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
import zarr

from tests.arrays import make_rows_array, snapshot
from tests.inprocess import in_process, refused

EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL


@pytest.fixture
def raw_array(tmp_path) -> Path:
    return make_rows_array(tmp_path / "arr")


@pytest.mark.expect_log(r"create: .* is not a chunk of the grid (here|in this directory)")
def test_scratch_name_rule(raw_array):
    """Template names are scratch files only when created with O_EXCL (as mkstemp does);
    plain names and names of digits are refused with EPERM, and the store is untouched."""
    before = snapshot(raw_array)
    leaf = "c/0/000/0"
    with in_process(str(raw_array)) as fs:
        for name in ["sedAb12Cd", "tmpab_12xyz", "tmpab_12xyz.tiff", "XXY2640t", ".x", "#x#",
                     "x~", "x.swp"]:
            fs.close(fs.open(f"{leaf}/{name}", EXCLUSIVE))
            fs.unlink(f"{leaf}/{name}")
        for name in ["sedAb12Cd", "notes123", "notes.txt"]:  # not exclusive: `echo > name`
            assert refused(lambda n=name: fs.write(f"{leaf}/{n}", b"x")) == errno.EPERM, name
        assert refused(lambda: fs.write(f"{leaf}/notes123", b"x"),
                       "'notes123' is not a chunk of the grid here, nor a temporary file name",
                       ) == errno.EPERM
        assert refused(lambda: fs.open(f"{leaf}/4913", EXCLUSIVE),
                       "'4913': vim's write probe, refused") == errno.EPERM
        for name in ["4913", "12345678", "0001"]:  # digits: chunk names, never scratch
            assert refused(lambda n=name: fs.open(f"{leaf}/{n}", EXCLUSIVE)) == errno.EPERM
        assert refused(lambda: fs.open("c/0/4913", EXCLUSIVE)) == errno.EPERM
        # A scratch file may be renamed to a template name: its bytes are scratch already.
        fs.write(f"{leaf}/.a", b"x")
        fs.rename(f"{leaf}/.a", f"{leaf}/XXY2640t")
        fs.unlink(f"{leaf}/XXY2640t")
        assert fs.listdir(leaf) == ["000"]
        # Nor may anything but a scratch file be renamed (mogrify then copies instead).
        assert refused(lambda: fs.rename(f"{leaf}/000", f"{leaf}/000~")) == errno.EPERM
    assert snapshot(raw_array) == before


@pytest.mark.expect_log(r"rename: chunk .* nothing was written")
def test_a_scratch_file_renamed_onto_a_chunk_name_is_committed_as_that_chunk(raw_array):
    """sed -i, mkstemp + os.replace, gio: the temp file's bytes become the chunk, checked as
    any write is; a rename onto an absent grid position stores a new chunk."""
    leaf = "c/0/003/0"
    with in_process(str(raw_array)) as fs:
        fs.write("c/0/000/0/.sedX1y2Z3", bytes(range(100, 116)))
        fs.rename("c/0/000/0/.sedX1y2Z3", "c/0/000/0/000")
        fs.write(f"{leaf}/.new", bytes(16 * [9]))
        fs.rename(f"{leaf}/.new", f"{leaf}/000")
        assert fs.listdir(leaf) == ["000"]
        fs.write(f"{leaf}/.short", b"\x01")  # 1 byte: not a chunk of this array
        assert refused(lambda: fs.rename(f"{leaf}/.short", f"{leaf}/000")) == errno.EIO
        assert fs.read(f"{leaf}/000") == bytes(16 * [9])
    stored = zarr.open_array(raw_array)[:]
    assert stored[0].tolist() == list(range(100, 116))
    assert stored[3].tolist() == [9] * 16


@pytest.mark.expect_log(r"(open|unlink|create): array / cannot be written")
def test_array_that_cannot_be_written_refuses_at_open(tmp_path):
    """concat-parts with two unsized parts cannot split a written value: its files show no
    write bits and every write is refused when attempted (EROFS), not lost at close()."""
    path = tmp_path / "twoparts"
    zarr.create_array(path, shape=(8,), chunks=(8,), dtype="u1", compressors=None,
                      fill_value=0)
    document = json.loads((path / "zarr.json").read_text())
    document["storage_transformers"] = [{"name": "concat-parts", "configuration": {"parts": [
        {"key_suffix": ""}, {"key_suffix": ".tail"}]}}]
    (path / "zarr.json").write_text(json.dumps(document))
    (path / "c").mkdir()
    (path / "c/0").write_bytes(bytes(range(5)))
    (path / "c/0.tail").write_bytes(bytes(range(5, 8)))
    before = snapshot(path)
    with in_process(str(path)) as fs:
        chunk = "c/0/000"
        assert fs.read(chunk) == bytes(range(8))
        assert stat.S_IMODE(fs.stat(chunk).mode) & 0o222 == 0
        assert stat.S_IMODE(fs.stat("c/0").mode) & 0o222 == 0
        for attempt in [
            lambda: fs.open(chunk, os.O_RDWR),
            lambda: fs.open(chunk, os.O_WRONLY | os.O_TRUNC),
            lambda: fs.unlink(chunk),
            lambda: fs.open("c/0/.x.tmp", EXCLUSIVE),
        ]:
            assert refused(attempt) == errno.EROFS
    assert snapshot(path) == before


@pytest.mark.expect_log(r"setattr: a scratch file of .* over the limit")
def test_a_scratch_file_changed_takes_the_time_of_the_change_and_one_too_big_is_efbig(tmp_path):
    """Issue 34's smaller points: truncate (and write) set a scratch file's time, as on any
    filesystem; a scratch file larger than the whole scratch area is EFBIG, not ENOSPC."""
    zarr.create_array(tmp_path / "a", shape=(4,), chunks=(4,), dtype="u1")
    with in_process(str(tmp_path / "a"), scratch_mb=1) as fs:
        handle = fs.open(".tmp1.tmp", os.O_WRONLY | os.O_CREAT)
        fs.set_mtime(".tmp1.tmp", 10**9)
        assert fs.stat(".tmp1.tmp").time_ns == 10**9
        fs.ftruncate(handle, 100)
        assert fs.stat(".tmp1.tmp").time_ns > 10**18
        assert refused(lambda: fs.ftruncate(handle, 2 << 20)) == errno.EFBIG
        fs.close(handle)
