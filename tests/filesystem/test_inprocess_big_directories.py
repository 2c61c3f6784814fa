"""A store directory too big to list in full (a 1-D array of thousands of chunks under one
``c/``): a view directory of it costs a names-only listing and a stat of each of its own
stored chunks, never a stat of every key of the store directory (issue 35: a writable mount
repeated such a listing each second, 100,000 stats each time)."""

from __future__ import annotations

import numpy as np
import zarr

from tests.inprocess import in_process
from zarrfuse.filesystem.chunks import chunk_listings
from zarrfuse.filesystem.chunks.stored_set import KeyShape
from zarrfuse.storage.local import LocalBackend

CHUNKS = 5000  # over LISTABLE_KEYS (4096): the store directory is never listed with stats


def _flat(path, stored=None):
    """A 1-D array of CHUNKS chunks of 2 bytes, chunk i holding i: all stored (None), or
    only those of ``stored``."""
    a = zarr.create_array(path, shape=(CHUNKS,), chunks=(1,), dtype="u2", compressors=None,
                          fill_value=0)
    if stored is None:
        a[:] = np.arange(CHUNKS, dtype="u2")
    for i in stored or ():
        a[i] = i
    return path


def _asked(fs, before):
    return {k: v - before.get(k, 0) for k, v in fs.ops.counters.store.items()
            if v != before.get(k, 0)}


def test_a_view_directory_stats_only_its_own_chunks(tmp_path):
    path = _flat(tmp_path / "flat")
    with in_process(path) as fs:
        before = dict(fs.ops.counters.store)
        entries = dict(fs.entries("c/1/001"))  # chunks 1000 to 1999 (some fanout holds 996)
        assert entries and all(a.size == 2 for a in entries.values())
        assert _asked(fs, before) == {"list": 1, "stat": len(entries)}
        before = dict(fs.ops.counters.store)
        name = sorted(entries)[10]
        assert fs.size(f"c/1/001/{name}") == 2  # a lookup after it asks nothing
        assert np.frombuffer(fs.read(f"c/1/001/{name}"), "<u2")[0] == 1000 + int(name)
        assert "stat" not in _asked(fs, before)


def test_a_sparse_big_directory_stats_only_what_is_stored(tmp_path):
    stored = [3, 1004, 1500, 4999]
    path = _flat(tmp_path / "sparse", stored)
    with in_process(path) as fs:
        before = dict(fs.ops.counters.store)
        assert fs.listdir("c/1/001") == ["004", "500"]
        assert _asked(fs, before).get("stat", 0) <= 2  # not one per grid position


def test_a_chunk_written_through_the_mount_shows_its_new_size_at_once(tmp_path):
    path = _flat(tmp_path / "flat")
    with in_process(path) as fs:
        entries = dict(fs.entries("c/1/001"))
        name = sorted(entries)[0]
        fs.write(f"c/1/001/{name}", np.array([7], "<u2").tobytes())  # the same size
        assert fs.size(f"c/1/001/{name}") == 2
        assert dict(fs.entries("c/1/001"))[name].size == 2
    assert zarr.open_array(path)[1000 + int(name)] == 7


def test_a_walk_of_a_dense_array_decodes_no_chunk_key(tmp_path, monkeypatch):
    """Which fanout directories lead to stored chunks is learnt from the names a listing
    holds, looked for in grid order: no decoding of every key of the store directory
    (a fifth of ``find``'s time over 100,000 chunks, when each was decoded)."""
    path = _flat(tmp_path / "flat")
    decoded = []
    decode = KeyShape.decode
    monkeypatch.setattr(KeyShape, "decode", lambda self, parts: decoded.append(parts) or
                        decode(self, parts))
    with in_process(path) as fs:
        files = fs.walk("c")
    assert len(files) == CHUNKS - 1  # chunk 0 holds the fill value: not stored
    assert {"0/001", "0/999", "1/001/000", "1/004/999"} <= files
    assert decoded == []


def test_a_big_directory_listed_in_full_is_listed_in_shares_with_every_size(
        tmp_path, monkeypatch):
    """Walked from the top, the store directory is listed with its stats once, by several
    threads each taking a share of the names (a stat waiting on the disk leaves the others
    going): every chunk shows once, with its size."""
    path = _flat(tmp_path / "flat")
    monkeypatch.setattr(chunk_listings, "STAT_THREADS", 3)
    shares = []
    share = LocalBackend.list_stats_share
    monkeypatch.setattr(LocalBackend, "list_stats_share", lambda self, prefix, i, n: (
        shares.append((prefix, i, n)) or share(self, prefix, i, n)))
    with in_process(path) as fs:
        assert len(fs.walk("c")) == CHUNKS - 1
        before = dict(fs.ops.counters.store)
        sizes = {a.size for leaf in ("c/0", "c/1/001", "c/1/004")
                 for _, a in fs.entries(leaf) if not a.is_dir}
        assert sizes == {2} and "stat" not in _asked(fs, before)
    assert sorted(shares) == [("c", 0, 3), ("c", 1, 3), ("c", 2, 3)]
