"""Real FUSE mounts: how names and sizes are answered without a store request per file.

Writing tools ask about every new name before creating it (``cp`` stats it, then the kernel
looks it up again for ``O_EXCL``) and stat every file after closing it. These tests count the
requests the daemon saw (``zarrfuse stats``) to check that absent names are remembered by the
kernel, that sizes learnt from a commit are reused, that a directory asked about file by file
is listed once instead, and that none of this hides a change made in the store for longer
than the writable mount's one-second timeout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.cli.operating import count, stats
from tests.mounting import mounted, run_with_timeout, wait_for

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(90)]

WRITABLE_TIMEOUT = 1.0  # zarrfuse.fuse.cache_times.WRITABLE_TIMEOUT, restated: the test oracle


def counters(mnt: Path) -> dict:
    return stats(mnt)["counters"]


@pytest.fixture
def row_array(tmp_path: Path) -> Path:
    """One row of 64 chunks of 16 uint8 (uncompressed), none stored."""
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(1, 64 * 16), chunks=(1, 16), dtype="u1", compressors=None,
                      fill_value=0)
    return path


def test_an_absent_name_is_asked_about_once(row_array, tmp_path):
    # A TTL far longer than the loop: with the writable default (1 s) a loaded machine can
    # let the kernel's negative entry expire between two of the five checks.
    with mounted(row_array, tmp_path / "mnt", "--metadata-ttl", "60") as mnt:
        leaf = mnt / "c/0/000/0"
        assert leaf.is_dir()  # the directories' lookups are not what is counted
        before = counters(mnt)
        for _ in range(5):
            assert not (leaf / "007").exists()
        after = counters(mnt)
        assert count(after, "requests", "lookup") - count(before, "requests", "lookup") == 1
        negatives = (count(after, "cache", "negative_entry")
                     - count(before, "cache", "negative_entry"))
        assert negatives == 1
        # The kernel forgets the absence when the file is created through the mount.
        (leaf / "007").write_bytes(bytes(range(16)))
        assert (leaf / "007").read_bytes() == bytes(range(16))
        assert zarr.open_array(row_array)[0, 7 * 16 : 8 * 16].tolist() == list(range(16))


def test_a_chunk_stored_behind_the_mount_appears_within_the_timeout(row_array, tmp_path):
    with mounted(row_array, tmp_path / "mnt") as mnt:
        name = mnt / "c/0/000/0/009"
        assert not name.exists()  # remembered as absent by the kernel
        zarr.open_array(row_array)[0, 9 * 16 : 10 * 16] = np.arange(16, dtype="u1")
        assert wait_for(name.exists, timeout=3 * WRITABLE_TIMEOUT)
        assert name.read_bytes() == bytes(range(16))


def test_a_written_chunk_is_stat_ed_without_asking_the_store(row_array, tmp_path):
    with mounted(row_array, tmp_path / "mnt") as mnt:
        chunk = mnt / "c/0/000/0/003"
        assert chunk.parent.is_dir()
        before = counters(mnt)
        chunk.write_bytes(b"x" * 16)  # the lookup before create may stat the store once
        assert os.stat(chunk).st_size == 16  # the kernel asks again: the write changed it
        after = counters(mnt)
        assert count(after, "requests", "getattr") > count(before, "requests", "getattr")
        stats = count(after, "store_requests", "stat") - count(before, "store_requests", "stat")
        lists = count(after, "store_requests", "list") - count(before, "store_requests", "list")
        assert stats + lists <= 1, (stats, lists)


def test_many_names_in_one_directory_cost_one_listing(row_array, tmp_path):
    with mounted(row_array, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        (row_array / "c/0").mkdir(parents=True)
        for c in (40, 41):
            (row_array / f"c/0/{c}").write_bytes(bytes([c]) * 16)
        before = counters(mnt)
        sizes = [os.stat(leaf / f"{c:03d}").st_size if (leaf / f"{c:03d}").exists() else None
                 for c in range(30, 50)]
        after = counters(mnt)
        assert sizes == [None] * 10 + [16, 16] + [None] * 8
        stats = count(after, "store_requests", "stat") - count(before, "store_requests", "stat")
        lists = count(after, "store_requests", "list") - count(before, "store_requests", "list")
        assert lists <= 2 and stats <= 4, (lists, stats)  # not one request per name


def test_flat_store_directories_are_not_listed_for_one_name(tmp_path):
    """A flat layout (``.`` separator) keeps every chunk in one directory: listing it to
    answer for a few chunks would cost as much as the array has chunks (8192 here)."""
    path = tmp_path / "flat"
    a = zarr.create_array(path, shape=(128, 64), chunks=(1, 1), dtype="u1", compressors=None,
                          fill_value=0, chunk_key_encoding={"name": "default", "separator": "."})
    a[0, :6] = 1
    with mounted(path, tmp_path / "mnt") as mnt:
        before = counters(mnt)
        assert all((mnt / f"c/0/000/0/{c:03d}").exists() for c in range(6))
        after = counters(mnt)
        assert count(after, "store_requests", "list") == count(before, "store_requests", "list")
        assert count(after, "store_requests", "stat") - count(before, "store_requests", "stat") >= 6


@pytest.fixture
def group_store(tmp_path: Path) -> Path:
    """A group with one array ``a`` (4 uint8 in chunks of 2)."""
    path = tmp_path / "group"
    root = zarr.open_group(path, mode="w")
    root.create_array("a", shape=(4,), chunks=(2,), dtype="u1", fill_value=0)[:] = [1, 2, 3, 4]
    return path


def shape_shown(mnt: Path, name: str) -> list[int] | None:
    try:
        return json.loads((mnt / name / "zarr.json").read_bytes())["shape"]
    except FileNotFoundError:
        return None


@pytest.mark.parametrize("options", [(), ("--read-only", "--metadata-ttl", "0.5")])
def test_group_children_follow_the_store_within_the_timeout(group_store, tmp_path, options):
    with mounted(group_store, tmp_path / "mnt", *options) as mnt:
        assert sorted(os.listdir(mnt)) == ["a", "zarr.json"]
        assert shape_shown(mnt, "a") == [4]
        root = zarr.open_group(group_store, mode="r+")
        root.create_array("b", shape=(3,), chunks=(3,), dtype="u1", fill_value=0)[:] = [7, 8, 9]
        root["a"].resize((6,))
        assert wait_for(lambda: "b" in os.listdir(mnt), timeout=3 * WRITABLE_TIMEOUT)
        assert wait_for(lambda: shape_shown(mnt, "a") == [6], timeout=3 * WRITABLE_TIMEOUT)
        assert zarr.open_array(mnt / "b")[:].tolist() == [7, 8, 9]


def test_a_read_only_mount_keeps_the_group_it_mounted(group_store, tmp_path):
    """Without --metadata-ttl a read-only mount trusts what it read for its whole life."""
    with mounted(group_store, tmp_path / "mnt", "--read-only") as mnt:
        assert sorted(os.listdir(mnt)) == ["a", "zarr.json"]
        zarr.open_group(group_store, mode="r+")["a"].resize((6,))
        assert not wait_for(lambda: shape_shown(mnt, "a") == [6], timeout=1.5)


def test_ls_a_lists_dot_and_dot_dot_and_tools_are_unaffected(tmp_path):
    """``ls -a`` shows ``.`` and ``..`` in every directory; ``find`` and ``rsync`` (which skip
    them) see exactly the files they saw before."""
    zarr.create_array(tmp_path / "a", data=np.ones((4, 4), dtype="u1"), chunks=(2, 2))
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        for where in (mnt, mnt / "c", mnt / "c" / "0"):
            listed = run_with_timeout(["ls", "-a", where]).stdout.split()
            assert listed[:2] == [".", ".."] and listed.count(".") == 1
        found = sorted(run_with_timeout(["find", mnt, "-type", "f"]).stdout.split())
        assert len(found) == 1 + 4 and all(".." not in f for f in found)
        run_with_timeout(["rsync", "-a", f"{mnt}/", tmp_path / "copy"])
        assert sorted(str(p.relative_to(tmp_path / "copy")) for p in
                      (tmp_path / "copy").rglob("*") if p.is_file()) == sorted(
            str(Path(f).relative_to(mnt)) for f in found)
