"""Real FUSE mounts, read side: names, sizes, bytes, real tools, zarr through the mount."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec

import zarrfuse
from tests.mounting import daemon_pid, mounted, read_bytes_of, run_with_timeout
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding, SuffixChunkKeyEncoding
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import serve

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

HEADER_INDEX = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": 64}, {"key_suffix": ""},
    {"key_suffix": ".index", "size": 1604}]}}]


def files_under(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def expected_view(source: zarr.Array, store_root: Path, encoding, parts=("",)) -> dict[str, bytes]:
    """Every stored chunk's view path and logical bytes (parts concatenated), from the store."""
    out = {}
    chunk_shape = source.metadata.chunk_grid.chunk_shape
    grid = [len(range(0, s, c)) for s, c in zip(source.shape, chunk_shape, strict=True)]
    for coords in np.ndindex(*grid):
        key = source.metadata.encode_chunk_key(coords)
        paths = [store_root / (key + p) for p in parts]
        if all(p.exists() for p in paths):
            out[encoding.encode_chunk_key(coords)] = b"".join(p.read_bytes() for p in paths)
    return out


@pytest.fixture
def array_2d(tmp_path) -> tuple[Path, np.ndarray]:
    """A zstd-compressed 2-D array with a hole (one chunk never written) and edge chunks."""
    path = tmp_path / "arr"
    data = np.random.default_rng(0).integers(0, 1000, (250, 330), dtype="u2")
    a = zarr.create_array(path, shape=data.shape, chunks=(100, 100), dtype="u2",
                          compressors=[ZstdCodec()], fill_value=0)
    a[:] = data
    a[100:200, 100:200] = 0  # chunk (1, 1) is all fill value: not stored
    data[100:200, 100:200] = 0
    return path, data


def test_array_listing_sizes_and_bytes(array_2d, tmp_path):
    path, _data = array_2d
    source = zarr.open_array(path)
    expected = expected_view(source, path, FanoutChunkKeyEncoding(1000))
    assert len(expected) == 3 * 4 - 1
    with mounted(path, tmp_path / "mnt") as mnt:
        assert sorted(os.listdir(mnt)) == ["c", "zarr.json"]
        seen = files_under(mnt)
        assert set(seen) == {"zarr.json", *expected}
        for name, want in expected.items():
            assert os.stat(mnt / name).st_size == len(want)
            with open(mnt / name, "rb") as f:
                assert f.read() == want
            with open(mnt / name, "rb") as f:  # a read at an offset
                f.seek(7)
                assert f.read(100) == want[7:107]
        # Directories come from the grid: the hole's leaf directory exists, empty of (1, 1).
        assert "001" not in os.listdir(mnt / "c/0/001/0")
        assert sorted(os.listdir(mnt / "c/0/001/0")) == ["000", "002", "003"]
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "c/0/001/0/001")
        for bad in ["c/0/001/0/004", "c/0/001/0/01", "c/0/003", "c/1", "x", "c/0/001/0/000.tiff"]:
            with pytest.raises(FileNotFoundError):
                os.stat(mnt / bad)
        st = os.statvfs(mnt)
        assert st.f_namemax == 255
        mounts = Path("/proc/mounts").read_text()
        assert f" {mnt} fuse.zarrfuse " in mounts


def test_zarr_through_the_mount_equals_source(array_2d, tmp_path):
    path, data = array_2d
    with mounted(path, tmp_path / "mnt") as mnt:
        meta = json.loads((mnt / "zarr.json").read_text())
        assert meta["chunk_key_encoding"] == {
            "name": "fanout", "configuration": {"max_children": 1000}}
        assert "storage_transformers" not in meta
        np.testing.assert_array_equal(zarr.open_array(mnt, mode="r")[:], data)
        np.testing.assert_array_equal(zarrfuse.open_array(mnt)[:], data)


def test_find_and_cp_with_suffix_and_small_fanout(array_2d, tmp_path):
    path, _ = array_2d
    encoding = SuffixChunkKeyEncoding(".bin", FanoutChunkKeyEncoding(100))
    expected = expected_view(zarr.open_array(path), path, encoding)
    with mounted(path, tmp_path / "mnt", "--suffix", ".bin", "--max-children", "100") as mnt:
        found = run_with_timeout(["find", str(mnt), "-type", "f", "-name", "*.bin"], 30)
        names = sorted(Path(p).relative_to(mnt).as_posix() for p in found.stdout.split())
        assert names == sorted(expected)
        run_with_timeout(["cp", "-r", str(mnt), str(tmp_path / "copy")], 60)
    copied = files_under(tmp_path / "copy")
    assert {k: v.read_bytes() for k, v in copied.items() if k != "zarr.json"} == expected
    meta = json.loads(copied["zarr.json"].read_bytes())
    assert meta["chunk_key_encoding"] == encoding.to_dict()
    # The copy is itself a valid array with the view's encoding.
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "copy")[:], zarr.open_array(path)[:])


def test_no_directory_exceeds_max_children(tmp_path):
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(2500,), chunks=(1,), dtype="u1", compressors=None,
                          fill_value=0)
    a[:] = 1
    with mounted(path, tmp_path / "mnt", "--max-children", "100") as mnt:
        sizes = {d: len(os.listdir(d)) for d in [mnt / "c" / "1", mnt / "c/1/24", mnt / "c/0"]}
        assert sizes[mnt / "c/0"] == 100 and sizes[mnt / "c/1/24"] == 100
        total = 0
        for _root, dirs, files in os.walk(mnt):
            assert len(dirs) + len(files) <= 100
            total += len(files)
        assert total == 2500 + 1  # chunks and zarr.json


def test_stray_keys_temp_files_and_parts_never_appear(tmp_path):
    path = tmp_path / "arr"
    crc = [{"name": "concat-parts", "configuration": {"parts": [
        {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}]
    a = zarrfuse.create_array(path, shape=(4, 4), chunks=(2, 2), dtype="u1",
                              compressors=[Crc32cCodec()], storage_transformers=crc)
    a[:] = np.arange(16).reshape(4, 4)
    (path / "c/0/0.0123456789abcdef.partial").write_bytes(b"temp")
    (path / "c/0/junk").write_bytes(b"junk")
    (path / "c/0/00").write_bytes(b"non-canonical")
    with mounted(path, tmp_path / "mnt") as mnt:
        assert sorted(os.listdir(mnt / "c/0/000/0")) == ["000", "001"]
        assert (mnt / "c/0/000/0/000").read_bytes() == (path / "c/0/0").read_bytes() + (
            path / "c/0/0.crc32c").read_bytes()
        np.testing.assert_array_equal(zarr.open_array(mnt)[:], np.arange(16).reshape(4, 4))


def test_sharded_array_shows_shards(tmp_path):
    path = tmp_path / "arr"
    data = np.random.default_rng(3).integers(0, 255, (400, 300), dtype="u1")
    a = zarr.create_array(path, shape=data.shape, chunks=(50, 50), shards=(200, 150),
                          dtype="u1", compressors=[ZstdCodec()])
    a[:] = data
    expected = expected_view(a, path, FanoutChunkKeyEncoding(1000))
    assert len(expected) == 4  # 2 x 2 shards
    with mounted(path, tmp_path / "mnt", "--read-only") as mnt:
        chunks = {k: v.read_bytes() for k, v in files_under(mnt).items() if k != "zarr.json"}
        assert chunks == expected
        np.testing.assert_array_equal(zarr.open_array(mnt)[:], data)


def test_concat_parts_sharding_example(tmp_path):
    """The spec's sharding example: each shard file is header + tiles + index, assembled."""
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(10000, 10000), dtype="uint8", fill_value=0,
                              serializer=BytesCodec(), shards=(5000, 5000), chunks=(500, 500),
                              compressors=None, storage_transformers=HEADER_INDEX)
    block = np.random.default_rng(4).integers(1, 255, (600, 700), dtype="u1")
    a[4700:5300, 4600:5300] = block  # touches all four shards
    expected = expected_view(a, path, FanoutChunkKeyEncoding(1000), parts=(".header", "", ".index"))
    assert len(expected) == 4
    with mounted(path, tmp_path / "mnt", "--read-only") as mnt:
        chunks = {k: v.read_bytes() for k, v in files_under(mnt).items() if k != "zarr.json"}
        assert chunks == expected
        through = zarr.open_array(mnt)
        np.testing.assert_array_equal(through[4700:5300, 4600:5300], block)
        assert through[0:100, 0:100].sum() == 0


def test_missing_part_is_eio_and_the_mount_keeps_serving(tmp_path):
    path = tmp_path / "arr"
    crc = [{"name": "concat-parts", "configuration": {"parts": [
        {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}]
    a = zarrfuse.create_array(path, shape=(4,), chunks=(2,), dtype="u1",
                              compressors=[Crc32cCodec()], storage_transformers=crc)
    a[:] = [1, 2, 3, 4]
    (path / "c/0.crc32c").unlink()
    (path / "c/1.crc32c").write_bytes(b"12345")  # wrong size
    with mounted(path, tmp_path / "mnt") as mnt:
        for name in ["c/0/000", "c/0/001"]:
            with pytest.raises(OSError) as caught:
                (mnt / name).read_bytes()
            assert caught.value.errno == errno.EIO
        assert (mnt / "zarr.json").read_bytes()  # still serving


def test_group_and_ome_zarr_multiscale(tmp_path):
    path = tmp_path / "image.ome.zarr"
    root = zarr.create_group(path, attributes={"multiscales": [{
        "version": "0.5", "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0**i, 2.0**i]}]} for i in range(3)]}]})
    levels = []
    for i in range(3):
        data = np.random.default_rng(i).integers(0, 255, (256 >> i, 256 >> i), dtype="u1")
        arr = root.create_array(str(i), shape=data.shape, chunks=(64, 64), dtype="u1")
        arr[:] = data
        levels.append(data)
    nested = root.create_group("labels").create_array("cells", shape=(10,), chunks=(5,), dtype="i4")
    nested[:] = np.arange(10)
    (path / "not-a-node").mkdir()
    with mounted(path, tmp_path / "mnt") as mnt:
        assert sorted(os.listdir(mnt)) == ["0", "1", "2", "labels", "zarr.json"]
        assert json.loads((mnt / "zarr.json").read_text())["attributes"]["multiscales"]
        group = zarr.open_group(mnt, mode="r")
        for i, data in enumerate(levels):
            np.testing.assert_array_equal(group[str(i)][:], data)
        np.testing.assert_array_equal(zarr.open_array(mnt / "labels" / "cells")[:], np.arange(10))
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "not-a-node")


def test_zero_dimensional_array(tmp_path):
    path = tmp_path / "scalar"
    a = zarr.create_array(path, shape=(), dtype="f8", compressors=None)
    a[()] = 3.5
    with mounted(path, tmp_path / "mnt", "--suffix", ".raw") as mnt:
        assert sorted(os.listdir(mnt)) == ["c.raw", "zarr.json"]
        assert (mnt / "c.raw").read_bytes() == (path / "c").read_bytes()
        assert zarr.open_array(mnt)[()] == 3.5


def test_extended_attributes_are_answered(array_2d, tmp_path):
    path, _ = array_2d
    with mounted(path, tmp_path / "mnt") as mnt:
        for _ in range(3):
            with pytest.raises(OSError) as caught:
                os.getxattr(mnt / "zarr.json", "user.test")
            assert caught.value.errno in (errno.EOPNOTSUPP, errno.ENODATA)
        assert subprocess.run(["ls", "-l", str(mnt / "c/0/000/0")], capture_output=True,
                              timeout=30).returncode == 0


def test_partial_read_fetches_only_what_is_needed(tmp_path):
    """The first 64 KiB of a 100 MiB shard must not fetch the shard (daemon's /proc io)."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(10240, 10240), chunks=(1024, 1024), shards=(10240, 10240),
                          dtype="u1", compressors=None)
    a[:] = 1
    shard = path / "c/0/0"
    assert shard.stat().st_size > 100 * 2**20
    with mounted(path, tmp_path / "mnt", "--read-only") as mnt:
        pid = daemon_pid(mnt)
        before = read_bytes_of(pid)
        with open(mnt / "c/0/000/0/000", "rb") as f:
            head = f.read(64 * 1024)
        fetched = read_bytes_of(pid) - before
    assert head == shard.read_bytes()[: 64 * 1024]
    assert fetched <= 2 * 64 * 1024 + 2 * 2**20, fetched  # plus kernel readahead (1 MiB windows)


def test_concurrent_readers(array_2d, tmp_path):
    path, _ = array_2d
    expected = expected_view(zarr.open_array(path), path, FanoutChunkKeyEncoding(1000))
    errors: list[Exception] = []
    with mounted(path, tmp_path / "mnt") as mnt:
        def reader(name: str) -> None:
            try:
                for _ in range(20):
                    assert (mnt / name).read_bytes() == expected[name]
            except Exception as e:  # pragma: no cover  # noqa: BLE001  (any failure fails the test below)
                errors.append(e)
        threads = [threading.Thread(target=reader, args=(n,)) for n in expected]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors


@pytest.mark.timeout(60)
def test_huge_grid_mounts_fast(tmp_path):
    """Mounting does not depend on the grid: 10**8 possible chunks, and the mount is ready
    long before anything that visits each of them could be (a deadline, not a figure: a
    Python loop over 10**8 chunks alone takes longer)."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(10**8,), chunks=(1,), dtype="u1", compressors=None)
    a[12_345_678] = 7
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    ready = threading.Event()
    config = MountConfig(source=str(path), mountpoint=str(mnt), read_only=True)
    server = threading.Thread(target=serve, args=(config, ready.set), daemon=True)
    server.start()
    try:
        assert ready.wait(10)
        # Read through another process: a client thread of the daemon's own process would
        # deadlock (CPython's open() calls fstat holding the GIL the daemon needs).
        got = run_with_timeout(["od", "-An", "-tu1", str(mnt / "c/2/012/345/678")], 30)
        assert got.stdout.split() == ["7"]
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], timeout=30)
        server.join(30)
        if is_still_mounted(mnt):  # pragma: no cover - teardown safety net
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], timeout=30)


def is_still_mounted(mnt: Path) -> bool:
    return f" {mnt} " in Path("/proc/mounts").read_text()


def test_group_in_a_zip_store(tmp_path):
    """A non-local store (zip) goes through zarr's Store API: groups list their children."""
    zip_path = tmp_path / "g.zip"
    store = zarr.storage.ZipStore(zip_path, mode="w")
    group = zarr.create_group(store)
    group.create_array("img", shape=(4, 4), chunks=(2, 2), dtype="u1")[:] = 5
    group.create_group("sub").create_array("x", shape=(3,), chunks=(3,), dtype="i2")[:] = 1
    store.close()
    with mounted(zip_path, tmp_path / "mnt", "--read-only") as mnt:
        assert sorted(os.listdir(mnt)) == ["img", "sub", "zarr.json"]
        assert sorted(os.listdir(mnt / "sub")) == ["x", "zarr.json"]
        assert int(zarr.open_array(mnt / "img")[:].sum()) == 80
        assert zarr.open_array(mnt / "sub" / "x")[:].tolist() == [1, 1, 1]
