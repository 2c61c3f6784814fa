"""Real FUSE mounts and real rsync and find: the times files show are the store's.

Every file shows its stored object's time and every directory its ``zarr.json``'s, so a backup
made with ``rsync -a`` sees exactly what changed, whether written through the mount, written
behind it, or not at all (a remount). Times rsync sets on what it writes are kept. What the
times are (parts, directories, rendered chunks, a rebuild) is tested in process:
``tests/filesystem/test_inprocess_tree.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import zarrfuse
from tests.arrays import HEAD_PARTS
from tests.mounting import MountClock, mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

DAY_NS = 86400 * 10**9

def stored_array(path: Path, **kwargs: object) -> Path:
    """4x8 uint8 in 1x4 chunks, uncompressed (any 4 bytes are a valid chunk); every stored
    object dated a day back, so a write now differs from it at rsync's one-second
    resolution too."""
    a = zarrfuse.create_array(path, shape=(4, 8), chunks=(1, 4), dtype="u1", fill_value=0,
                              compressors=None, **kwargs)
    a[:] = np.arange(1, 33, dtype="u1").reshape(4, 8)
    age(path, DAY_NS)
    return path


def age(root: Path, by_ns: int) -> None:
    then = time.time_ns() - by_ns
    for p in [root, *root.rglob("*")]:
        os.utime(p, ns=(then, then))


def times(root: Path) -> dict[str, str]:
    """``find -printf``: every path's mtime (to the ns) and size, from a subprocess."""
    out = run_with_timeout(["find", root, "-mindepth", "1", "-printf", "%P %T@ %s\n"]).stdout
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines()}


def find_time(ns: int) -> str:
    """A time in ns as ``find -printf %T@`` prints it."""
    return f"{ns // 10**9}.{ns % 10**9:09d}0"


def rsync(src: Path, dst: Path) -> list[str]:
    """``rsync -a --itemize-changes SRC/ DST/``: the itemized lines (empty: nothing to do)."""
    out = run_with_timeout(
        ["rsync", "-a", "--itemize-changes", f"{src}/", f"{dst}/"], 60
    ).stdout
    return out.splitlines()


def transferred(lines: list[str]) -> list[str]:
    """The names of files whose data rsync sent (``>f``/``<f`` lines)."""
    return sorted(line.split(" ", 1)[1] for line in lines if line[:2] in (">f", "<f"))


def test_backup_sees_exactly_what_changed_through_the_mount(tmp_path, monkeypatch):
    array = stored_array(tmp_path / "arr")
    backup = tmp_path / "backup"
    with mounted(array, tmp_path / "mnt") as mnt:
        assert len(transferred(rsync(mnt, backup))) == 9  # zarr.json and 8 chunks
        assert rsync(mnt, backup) == []  # the same times and sizes: nothing at all to do
        shown = times(mnt)
        stored = os.stat(array / "c/2/1").st_mtime_ns
        assert shown["c/0/002/0/001"].split()[0] == find_time(stored)
        reference = tmp_path / "reference"  # between the stored times and a write's now
        reference.touch()
        hour_ago = time.time_ns() - 3600 * 10**9
        os.utime(reference, ns=(hour_ago, hour_ago))
        (mnt / "c/0/002/0/001").write_bytes(b"ABCD")
        assert (array / "c/2/1").read_bytes() == b"ABCD"
        assert transferred(rsync(mnt, backup)) == ["c/0/002/0/001"]
        assert (backup / "c/0/002/0/001").read_bytes() == b"ABCD"
        newer = run_with_timeout(["find", mnt, "-newer", reference, "-printf", "%P\n"]).stdout
        assert newer.split() == ["c/0/002/0/001"]
        # Written behind the mount: shown, with its time, once the TTL has passed.
    clock = MountClock(monkeypatch, tmp_path)
    with mounted(array, tmp_path / "mnt", "--metadata-ttl=0.3") as mnt:
        assert rsync(mnt, backup) == []  # a remount shows the very same times
        (array / "c/3/0").write_bytes(b"WXYZ")
        clock.ahead(1)  # past the TTL
        assert transferred(rsync(mnt, backup)) == ["c/0/003/0/000"]
        newer = run_with_timeout(["find", mnt, "-newer", reference, "-printf", "%P\n"]).stdout
        assert sorted(newer.split()) == ["c/0/002/0/001", "c/0/003/0/000"]


def test_rsync_into_the_mount_keeps_its_times(tmp_path):
    array = stored_array(tmp_path / "arr", storage_transformers=HEAD_PARTS)
    source = tmp_path / "src"
    with mounted(array, tmp_path / "mnt") as mnt:
        rsync(mnt / "c", source)
        (source / "0/001/0/000").write_bytes(b"abcd")  # same size, new bytes
        (source / "0/002/0/001").write_bytes(b"efgh")
        when = time.time_ns() - 7 * DAY_NS
        for name in ("0/001/0/000", "0/002/0/001"):
            os.utime(source / name, ns=(when, when))
        assert transferred(rsync(source, mnt / "c")) == ["0/001/0/000", "0/002/0/001"]
        assert rsync(source, mnt / "c") == []  # again: nothing to send, nothing to set
        assert (array / "c/1/0.head").read_bytes() + (array / "c/1/0").read_bytes() == b"abcd"
        assert os.stat(mnt / "c/0/001/0/000").st_mtime_ns == when
        assert os.stat(array / "c/1/0").st_mtime_ns == when  # stored with every part
        assert os.stat(array / "c/1/0.head").st_mtime_ns == when
        # touch -d on a chunk file itself is stored too.
        run_with_timeout(["touch", "-d", "2001-02-03 04:05:06", mnt / "c/0/000/0/000"])
        touched = os.stat(array / "c/0/0").st_mtime_ns
        assert time.gmtime(touched // 10**9)[:1] == (2001,)
        assert os.stat(mnt / "c/0/000/0/000").st_mtime_ns == touched
        # A commit moves the time forward.
        (mnt / "c/0/000/0/000").write_bytes(b"1234")
        assert os.stat(mnt / "c/0/000/0/000").st_mtime_ns > time.time_ns() - 60 * 10**9
    with mounted(array, tmp_path / "mnt") as mnt:
        assert os.stat(mnt / "c/0/001/0/000").st_mtime_ns == when
        assert transferred(rsync(source, mnt / "c")) == ["0/000/0/000"]  # the one written since
