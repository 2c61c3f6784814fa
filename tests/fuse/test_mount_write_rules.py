"""Real FUSE mounts, the rules around saves that involve the kernel: what an O_TRUNC open
closed unwritten shows through the attribute cache, and over-long names. The rest of the
rules (scratch names, renames, arrays that cannot be written) are tested in process:
``tests/filesystem/test_inprocess_write_rules.py``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import zarr

from tests.arrays import make_rows_array, snapshot
from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


@pytest.fixture
def raw_array(tmp_path) -> Path:
    return make_rows_array(tmp_path / "arr")


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
