"""What the tree shows, in process: times, ``--layout source`` and sparse listings. The
tools' side (rsync, find, zarr reading through a real mount) stays in ``tests/fuse/``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

import zarrfuse
from tests.arrays import CRC_PARTS, HEAD_PARTS
from tests.inprocess import in_process
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding

DAY_NS = 86400 * 10**9
VIEW = FanoutChunkKeyEncoding(1000)


def age(root: Path, by_ns: int) -> None:
    then = time.time_ns() - by_ns
    for p in [root, *root.rglob("*")]:
        os.utime(p, ns=(then, then))


def stored_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# --- times ---------------------------------------------------------------------------------


def test_times_are_the_stores_and_a_rebuild_shows_the_same(tmp_path, monkeypatch):
    """A chunk's time is its newest part's, a directory's its array's zarr.json's; nothing
    in them is the time of the mount, so a remount shows the very same times."""
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(4, 8), chunks=(1, 4), dtype="u1", fill_value=0,
                              compressors=None, storage_transformers=HEAD_PARTS)
    a[:] = np.arange(1, 33, dtype="u1").reshape(4, 8)
    age(path, DAY_NS)
    newest = time.time_ns() - 3600 * 10**9
    os.utime(path / "c/1/0.head", ns=(newest, newest))
    directory_time = os.stat(path / "zarr.json").st_mtime_ns

    def all_times(fs) -> dict[str, int]:  # type: ignore[no-untyped-def]
        return {name: fs.stat(name).time_ns for name in fs.walk()} | {
            "": fs.stat("").time_ns, "c/0/001": fs.stat("c/0/001").time_ns}

    with in_process(str(path), read_only=True) as fs:
        first = all_times(fs)
    assert first["c/0/001/0/000"] == newest
    assert first["c/0/000/0/000"] == os.stat(path / "c/0/0").st_mtime_ns
    assert first[""] == first["c/0/001"] == directory_time
    later = time.time() + 86400  # a rebuild a day later: a time of the mount would show
    with monkeypatch.context() as clock:
        clock.setattr(time, "time", lambda: later)
        clock.setattr(time, "time_ns", lambda: int(later * 10**9))
        with in_process(str(path), read_only=True) as fs:
            rebuilt = all_times(fs)
    assert rebuilt == first


def test_a_time_set_on_a_chunk_is_stored_with_every_part(tmp_path):
    path = tmp_path / "arr"
    zarrfuse.create_array(path, shape=(4, 8), chunks=(1, 4), dtype="u1", fill_value=0,
                          compressors=None, storage_transformers=HEAD_PARTS)[:] = 1
    when = time.time_ns() - 7 * DAY_NS
    with in_process(str(path)) as fs:
        fs.set_mtime("c/0/001/0/000", when)
        assert fs.stat("c/0/001/0/000").time_ns == when
        fs.write("c/0/001/0/001", b"abcd")  # a commit moves the time forward
        assert fs.stat("c/0/001/0/001").time_ns > time.time_ns() - 60 * 10**9
    assert os.stat(path / "c/1/0").st_mtime_ns == when
    assert os.stat(path / "c/1/0.head").st_mtime_ns == when
    with in_process(str(path)) as fs:
        assert fs.stat("c/0/001/0/000").time_ns == when


def test_rendered_chunks_show_their_shard_time(tmp_path):
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="u1",
                              fill_value=0)
    a[:4, :4] = 1  # only shard (0, 0) is stored
    age(path, DAY_NS)
    shard_time = time.time_ns() - 2 * DAY_NS
    os.utime(path / "c/0/0", ns=(shard_time, shard_time))
    metadata_time = os.stat(path / "zarr.json").st_mtime_ns
    with in_process(str(path), read_only=True, format="npy") as fs:
        # Inner chunks (0, 1) and (1, 0) live in the stored shard (0, 0); (3, 3) is not stored.
        assert {name: fs.stat(name).time_ns for name in (
            "c/0/000/0/001.npy", "c/0/001/0/000.npy", "c/0/003/0/003.npy")} == {
            "c/0/000/0/001.npy": shard_time, "c/0/001/0/000.npy": shard_time,
            "c/0/003/0/003.npy": metadata_time}


# --- --layout source -----------------------------------------------------------------------


@pytest.fixture
def parted_group(tmp_path) -> Path:
    """A consolidated v3 group: a concat-parts array (``/`` keys, a hole) and a flat
    ``.``-separated one."""
    root = tmp_path / "g.zarr"
    zarr.open_group(root, mode="w")
    rng = np.random.default_rng(3)
    parted = zarrfuse.create_array(
        root, name="parted", shape=(20, 30), chunks=(10, 10), dtype="u2", fill_value=0,
        compressors=[ZstdCodec(), Crc32cCodec()], storage_transformers=CRC_PARTS)
    parted[:] = rng.integers(0, 1000, (20, 30), dtype="u2")
    parted[10:, 10:20] = 0  # chunk (1, 1): fill value, not stored
    zarr.create_array(root / "flat", shape=(6, 4), chunks=(3, 2), dtype="f4",
                      chunk_key_encoding={"name": "default", "separator": "."})[:] = 1.5
    zarr.consolidate_metadata(root)
    return root


def test_source_layout_shows_own_keys_parts_assembled_and_no_transformer(parted_group):
    root = parted_group
    with in_process(str(root), read_only=True, layout="source") as fs:
        files = fs.walk()
        assert sorted(f for f in files if f.startswith("parted/c/")) == [
            "parted/c/0/0", "parted/c/0/1", "parted/c/0/2", "parted/c/1/0", "parted/c/1/2"]
        assert not any(f.endswith(".crc32c") for f in files)
        assert sorted(f for f in files if f.startswith("flat/")) == [
            "flat/c.0.0", "flat/c.0.1", "flat/c.1.0", "flat/c.1.1", "flat/zarr.json"]
        assert fs.read("parted/c/0/1") == (
            (root / "parted/c/0/1").read_bytes() + (root / "parted/c/0/1.crc32c").read_bytes())
        shown = json.loads(fs.read("parted/zarr.json"))
        assert "storage_transformers" not in shown
        assert shown["chunk_key_encoding"] == {"name": "default",
                                              "configuration": {"separator": "/"}}
        group = json.loads(fs.read("zarr.json"))
        assert group["consolidated_metadata"]["metadata"]["parted"] == shown
        assert fs.read("flat/zarr.json") == (root / "flat/zarr.json").read_bytes()


def test_source_layout_keeps_an_own_fanout_encoding(tmp_path):
    encoding = {"name": "suffix", "configuration": {
        "suffix": ".bin", "base_encoding": {"name": "fanout", "configuration": {
            "max_children": 100}}}}
    data = np.arange(2 * 120, dtype="i1").reshape(2, 120)
    zarr.create_array(tmp_path / "f.zarr", shape=data.shape, chunks=(1, 1), dtype="i1",
                      chunk_key_encoding=encoding, compressors=None)[:] = data
    with in_process(str(tmp_path / "f.zarr"), read_only=True, layout="source") as fs:
        assert fs.walk() == stored_files(tmp_path / "f.zarr")  # the store's very keys


def test_a_rendered_view_of_a_group_holds_no_zarr_document(parted_group):
    with in_process(str(parted_group), read_only=True, format="npy") as fs:
        names = {part for f in fs.walk() for part in f.split("/")}
        assert not names & {"zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata"}
        assert fs.stat("parted").is_dir


# --- sparse listings -----------------------------------------------------------------------


def test_a_flat_layout_lists_exactly_its_stored_chunks(tmp_path):
    """A million-by-million grid of which 50 chunks are stored, keys ``c.I.J``: the listing
    is learnt from the one directory, stray keys are not chunks."""
    rng = np.random.default_rng(2)
    points = sorted({(int(i), int(j)) for i, j in rng.integers(0, 10**6, size=(50, 2))})
    a = zarr.create_array(tmp_path / "arr", shape=(10**6, 10**6), chunks=(1, 1), dtype="u1",
                          fill_value=0, compressors=None,
                          chunk_key_encoding={"name": "default", "separator": "."})
    for i, j in points:
        a[i, j] = 1 + (i + j) % 200
    (tmp_path / "arr/c.junk.1").write_bytes(b"not a chunk")
    with in_process(str(tmp_path / "arr"), read_only=True) as fs:
        assert fs.walk() == {VIEW.encode_chunk_key(p) for p in points} | {"zarr.json"}
        i, j = points[0]
        assert fs.read(VIEW.encode_chunk_key((i, j))) == bytes([1 + (i + j) % 200])


def test_a_dense_array_lists_every_stored_chunk(tmp_path):
    source = tmp_path / "dense"
    a = zarr.create_array(source, shape=(4, 1200), chunks=(1, 1), dtype="u1", fill_value=0,
                          compressors=None)
    a[...] = 1
    a[3, 1100] = 0  # the fill value: zarr stores no chunk, the mount shows none
    expected = {VIEW.encode_chunk_key((i, j)) for i in range(4) for j in range(1200)}
    expected.discard(VIEW.encode_chunk_key((3, 1100)))
    with in_process(str(source), read_only=True) as fs:
        assert fs.walk() == expected | {"zarr.json"}


def test_an_empty_array_shows_no_chunk_and_its_group_stays(tmp_path):
    """Issue 34's smaller points: an array of shape (0, 64) has no chunk to show; it used to
    fail the mount of its whole group with a bare ValueError."""
    group = zarr.open_group(tmp_path / "g", mode="w")
    group.create_array("empty", shape=(0, 64), chunks=(16, 64), dtype="u1")
    group.create_array("ok", shape=(4,), chunks=(2,), dtype="u1")[:] = 3
    with in_process(str(tmp_path / "g"), read_only=True) as fs:
        assert fs.walk("empty") == {"zarr.json"}
        assert fs.walk("ok") == {"zarr.json", "c/0/000", "c/0/001"}
