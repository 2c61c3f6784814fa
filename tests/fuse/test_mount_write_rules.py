"""Real FUSE mounts, the rules around saves: which names are scratch files, what an O_TRUNC
open closed unwritten does, arrays that cannot be written, and over-long names."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def raw_array(tmp_path) -> Path:
    """4x16 uint8 in 1x16 chunks, uncompressed; rows 0-1 stored, rows 2-3 not."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(4, 16), chunks=(1, 16), dtype="u1", compressors=None,
                          fill_value=0)
    a[:2] = np.arange(32, dtype="u1").reshape(2, 16)
    return path


def errno_of(attempt) -> int:
    with pytest.raises(OSError) as caught:
        attempt()
    return caught.value.errno


def test_o_trunc_open_closed_unwritten_leaves_the_chunk(raw_array, tmp_path):
    """``: > chunk`` (and ImageMagick's first, empty open of its output) stores nothing: the
    chunk keeps its bytes and size, a chunk that was not stored stays absent, and nothing is
    logged as an error. A write or an explicit truncate still counts."""
    log = tmp_path / "daemon.log"
    before = snapshot(raw_array)
    with mounted(raw_array, tmp_path / "mnt", "--log-file", str(log)) as mnt:
        stored, absent = mnt / "c/0/000/0/000", mnt / "c/0/002/0/000"
        run_with_timeout(["sh", "-c", ': > "$1"', "sh", stored])
        assert stored.stat().st_size == 16  # at once after close(): the stored size again
        fd = os.open(stored, os.O_WRONLY | os.O_TRUNC)
        assert os.fstat(fd).st_size == 0  # the opener sees its truncated file meanwhile
        os.close(fd)
        assert stored.read_bytes() == bytes(range(16))
        run_with_timeout(["sh", "-c", ': > "$1"', "sh", absent])  # create, close unwritten
        assert not absent.exists()
        assert sorted(os.listdir(mnt / "c/0")) == ["000", "001"]
        assert snapshot(raw_array) == before
        # Written after the O_TRUNC open: stored as usual.
        run_with_timeout(["sh", "-c", 'printf 0123456789abcdef > "$1"', "sh", stored])
        fd = os.open(mnt / "c/0/001/0/000", os.O_WRONLY | os.O_TRUNC)
        os.ftruncate(fd, 16)  # an explicit truncate is a change: 16 zero bytes
        os.close(fd)
    assert zarr.open_array(raw_array)[0].tobytes() == b"0123456789abcdef"
    assert zarr.open_array(raw_array)[1].tolist() == [0] * 16
    assert not [line for line in log.read_text().splitlines()
                if " ERROR " in line or "discarding" in line]


def test_scratch_name_rule(raw_array, tmp_path):
    """Template names are scratch files only when created with O_EXCL (as mkstemp does);
    plain names and names of digits are refused with EPERM, and the store is untouched."""
    before = snapshot(raw_array)
    log = tmp_path / "daemon.log"
    with mounted(raw_array, tmp_path / "mnt", "--log-file", str(log)) as mnt:
        leaf = mnt / "c/0/000/0"
        exclusive = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        for name in ["sedAb12Cd", "tmpab_12xyz", "tmpab_12xyz.tiff", "XXY2640t", ".x", "#x#",
                     "x~", "x.swp"]:
            os.close(os.open(leaf / name, exclusive, 0o600))
            os.unlink(leaf / name)
        for name in ["sedAb12Cd", "notes123", "notes.txt"]:  # not exclusive: `echo > name`
            assert errno_of(lambda n=name: (leaf / n).write_bytes(b"x")) == errno.EPERM, name
        for name in ["4913", "12345678", "0001"]:  # digits: chunk names, never scratch
            flags = exclusive
            assert errno_of(lambda n=name, f=flags: os.open(leaf / n, f)) == errno.EPERM, name
        assert errno_of(lambda: os.open(mnt / "c/0/4913", exclusive)) == errno.EPERM
        # A scratch file may be renamed to a template name: its bytes are scratch already.
        (leaf / ".a").write_bytes(b"x")
        os.rename(leaf / ".a", leaf / "XXY2640t")
        os.unlink(leaf / "XXY2640t")
        assert os.listdir(leaf) == ["000"]
    assert snapshot(raw_array) == before
    text = log.read_text()
    assert "'notes123' is not a chunk of the grid here, nor a temporary file name" in text
    assert "'4913': vim's write probe, refused" in text
    assert "dropped at unmount" not in text


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
    with mounted(path, tmp_path / "mnt") as mnt:
        chunk = mnt / "c/0/000"
        assert chunk.read_bytes() == bytes(range(8))
        assert stat.S_IMODE(chunk.stat().st_mode) & 0o222 == 0
        assert stat.S_IMODE(chunk.parent.stat().st_mode) & 0o222 == 0
        result = run_with_timeout(["sh", "-c", 'echo x > "$1"', "sh", chunk], check=False)
        assert result.returncode != 0 and "Read-only file system" in result.stderr
        for attempt in [
            lambda: open(chunk, "r+b"),  # noqa: SIM115  (must fail: nothing to close)
            lambda: os.truncate(chunk, 1),
            lambda: os.unlink(chunk),
            lambda: (chunk.parent / ".x.tmp").write_bytes(b"x"),
        ]:
            assert errno_of(attempt) == errno.EROFS
    assert snapshot(path) == before


def test_names_over_255_bytes_are_enametoolong(raw_array, tmp_path):
    before = snapshot(raw_array)
    with mounted(raw_array, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        assert os.statvfs(mnt).f_namemax == 255
        longest = "." + "x" * 254  # a scratch name of exactly 255 bytes is fine
        (leaf / longest).write_bytes(b"x")
        os.rename(leaf / longest, leaf / ("#" + "é" * 127))  # 255 bytes in UTF-8
        os.unlink(leaf / ("#" + "é" * 127))
        for long in ["." + "x" * 255, "." + "x" * 1024, "#" + "é" * 128, "y" * 300]:
            path = leaf / long
            (leaf / ".short").write_bytes(b"x")
            for what, attempt in {
                "lookup": lambda p=path: os.stat(p),
                "create": lambda p=path: os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL),
                "mknod": lambda p=path: os.mkfifo(p),
                "mkdir": lambda p=path: os.mkdir(p),
                "rename": lambda p=path: os.rename(leaf / ".short", p),
                "symlink": lambda p=path: os.symlink("000", p),
                "link": lambda p=path: os.link(leaf / "000", p),
                "unlink": lambda p=path: os.unlink(p),
            }.items():
                assert errno_of(attempt) == errno.ENAMETOOLONG, (what, len(long.encode()))
            os.unlink(leaf / ".short")
        assert os.listdir(leaf) == ["000"]
    assert snapshot(raw_array) == before
