"""The persistent disk cache (issue 24, point 2), at the backend level against a real S3
server (moto on loopback): a second "mount" (a new backend on the same cache directory)
fetches no chunk bytes, a changed object is never served from the cache, the directory
stays under its limit, and a half-written or torn block is never served."""

from __future__ import annotations

import io
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import numcodecs.zarr3
import numpy as np
import pytest
import tifffile

import zarrfuse
from tests.arrays import CRC_PARTS
from tests.inprocess import in_process
from tests.mounting import mounted, run_with_timeout
from tests.s3server import S3Server, server_with_bucket
from zarrfuse.storage.cached_backend import CachingBackend
from zarrfuse.storage.disk_cache import BLOCK_SIZE, DiskCache
from zarrfuse.storage.objects import ObjectBackend

BUCKET = "cached"
MiB = 1 << 20


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as s3:
        yield s3


def _put(server: S3Server, key: str, data: bytes) -> None:
    boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").put_object(
        Bucket=BUCKET, Key=key, Body=data)


def _mount(server: S3Server, cache_dir: Path, limit: int = 1 << 30) -> CachingBackend:
    """What one mount builds: its own backend, on the shared cache directory."""
    inner = ObjectBackend(server.store(BUCKET))
    return CachingBackend(inner, DiskCache(cache_dir, limit), f"s3:{server.url}:{BUCKET}")


def _read(backend: CachingBackend, prefix: str, name: str, chunk: int = 128 << 10) -> bytes:
    """Read an object as the mount does: listed first, then read in kernel-sized pieces."""
    stats = backend.list_stats(prefix)
    reader = backend.open_reader([f"{prefix}/{name}"], [stats[name].size])
    try:
        out = bytearray(reader.sizes[0] or 0)
        for at in range(0, len(out), chunk):
            view = memoryview(out)[at : at + chunk]
            if reader.read_into_nowait(0, at, view) < len(view):
                reader.read_into(0, at, view)
        return bytes(out)
    finally:
        reader.close()


def _gets(server: S3Server) -> tuple[int, int]:
    counts, sent = server.snapshot()
    return counts["GET"], sent


def test_a_second_mount_reads_from_the_cache_and_not_from_the_server(server, tmp_path):
    objects = {f"c/{i}": os.urandom(3 * MiB + i) for i in range(4)}
    big = os.urandom(2 * BLOCK_SIZE + 5)  # several blocks
    for key, data in {**objects, "c/big": big}.items():
        _put(server, f"a/{key}", data)
    server.reset()
    first = _mount(server, tmp_path / "cache")
    for key, data in objects.items():
        assert _read(first, "a/c", key.split("/")[1]) == data
    assert _read(first, "a/c", "big") == big
    _, first_bytes = _gets(server)
    assert first_bytes >= sum(map(len, objects.values())) + len(big)
    server.reset()
    second = _mount(server, tmp_path / "cache")
    for key, data in objects.items():
        assert _read(second, "a/c", key.split("/")[1]) == data
    assert _read(second, "a/c", "big") == big
    gets, sent = _gets(server)
    assert gets == 0, "a cached block was fetched again"
    assert sent < first_bytes / 10  # listings only


def test_what_the_cache_holds_is_read_without_a_request_and_nothing_else_is(server, tmp_path):
    """read_held: the bytes of a listed object whose every block is cached, with no request;
    None for an object not listed, not cached, or changed since its blocks were kept."""
    data, other = os.urandom(2 * BLOCK_SIZE + 7), os.urandom(1000)
    _put(server, "held/c/0", data)
    _put(server, "held/c/1", other)
    assert _read(_mount(server, tmp_path / "cache"), "held/c", "0") == data
    mount = _mount(server, tmp_path / "cache")
    server.reset()
    assert mount.read_held("held/c/0") is None  # no listing yet: no validator to trust
    mount.list_stats("held/c")
    assert mount.read_held("held/c/0") == data
    assert mount.read_held("held/c/1") is None  # listed, never fetched
    assert _gets(server)[0] == 0
    _put(server, "held/c/0", os.urandom(len(data)))  # same size, new validator
    mount.list_stats("held/c")
    assert mount.read_held("held/c/0") is None


def test_a_warm_open_needs_no_worker_thread_and_a_cold_one_does(server, tmp_path):
    """open_reader_nowait: opened at once where the validator is known for the size asked,
    and read from the cache's pages without waiting; None (a worker thread asks) where the
    validator is unknown or names another size."""
    data = os.urandom(BLOCK_SIZE + 99)
    _put(server, "nowait/c/0", data)
    assert _read(_mount(server, tmp_path / "cache"), "nowait/c", "0") == data
    mount = _mount(server, tmp_path / "cache")
    assert mount.open_reader_nowait(["nowait/c/0"], [len(data)]) is None  # nothing learnt
    mount.list_stats("nowait/c")
    assert mount.open_reader_nowait(["nowait/c/0"], [len(data) + 1]) is None  # other size
    assert mount.open_reader_nowait(["nowait/c/0"], None) is None  # no listing time
    server.reset()
    reader = mount.open_reader_nowait(["nowait/c/0"], [len(data)])
    assert reader is not None and reader.sizes == (len(data),)
    try:
        out = bytearray(len(data))
        done = reader.read_into_nowait(0, 0, memoryview(out))
        if done < len(out):  # pages the kernel dropped: read, still without a request
            reader.read_into(0, done, memoryview(out)[done:])
    finally:
        reader.close()
    assert bytes(out) == data
    assert _gets(server)[0] == 0


def test_an_object_changed_on_the_server_is_fetched_anew(server, tmp_path):
    _put(server, "b/c/0", b"old" * 1000)
    assert _read(_mount(server, tmp_path / "cache"), "b/c", "0") == b"old" * 1000
    _put(server, "b/c/0", b"new" * 1000)  # same size, new LastModified/ETag
    assert _read(_mount(server, tmp_path / "cache"), "b/c", "0") == b"new" * 1000


def test_a_write_through_the_mount_is_never_shadowed_by_its_cached_old_bytes(server, tmp_path):
    _put(server, "w/c/0", b"A" * 5000)
    mount = _mount(server, tmp_path / "cache")
    assert _read(mount, "w/c", "0") == b"A" * 5000
    mount.write("w/c/0", [memoryview(b"B" * 5000)])
    reader = mount.open_reader(["w/c/0"], [5000])  # the size the write returned
    try:
        out = bytearray(5000)
        reader.read_into(0, 0, memoryview(out))
    finally:
        reader.close()
    assert bytes(out) == b"B" * 5000


def test_the_cache_stays_under_its_limit_least_recently_used_first(server, tmp_path):
    for i in range(8):
        _put(server, f"lru/c/{i}", bytes([i]) * MiB)
    mount = _mount(server, tmp_path / "cache", limit=4 * MiB)
    for i in range(8):
        _read(mount, "lru/c", str(i))
        size = sum(p.stat().st_size for p in (tmp_path / "cache" / "blocks").rglob("*")
                   if p.is_file())
        assert size <= 4 * MiB
    server.reset()
    assert _read(mount, "lru/c", "7") == bytes([7]) * MiB  # the most recent: still there
    assert _gets(server)[0] == 0
    assert _read(mount, "lru/c", "0") == bytes([0]) * MiB  # the oldest: gone, fetched again
    assert _gets(server)[0] >= 1


@pytest.mark.expect_log(r"has the wrong size: removed")
def test_a_torn_or_half_written_block_is_never_served(server, tmp_path):
    data = os.urandom(100_000)
    _put(server, "torn/c/0", data)
    assert _read(_mount(server, tmp_path / "cache"), "torn/c", "0") == data
    [block] = [p for p in (tmp_path / "cache" / "blocks").rglob("*") if p.is_file()]
    block.write_bytes(data[:50_000])  # a crash mid-write (without the rename) or a bad disk
    (block.parent / f"{block.name}.0123.tmp").write_bytes(b"x" * 100_000)  # a temp left over
    server.reset()
    assert _read(_mount(server, tmp_path / "cache"), "torn/c", "0") == data
    assert _gets(server)[0] >= 1  # fetched again, not served torn


def _tree(root: Path) -> dict[str, bytes]:
    found = run_with_timeout(["find", root, "-type", "f"]).stdout.split()
    return {str(Path(p).relative_to(root)): Path(p).read_bytes() for p in found}


@pytest.mark.fuse
@pytest.mark.timeout(180)
@pytest.mark.parametrize("view", [[], ["--format", "tiff"]], ids=["raw", "tiff"])
def test_a_second_mount_of_an_s3_array_gets_its_chunks_from_the_disk_cache(
    server, tmp_path, view
):
    url = f"s3://{BUCKET}/mounted{len(view)}"
    data = np.random.default_rng(3).integers(0, 255, (512, 512), dtype="u1")
    zarrfuse.create_array(url, data=data, chunks=(128, 128), compressors=None,
                          storage_options={"endpoint_url": server.url})
    args = ["--read-only", "--cache-dir", tmp_path / "cache", *view,
            "--storage-option", f"endpoint_url={server.url}"]
    server.reset()
    with mounted(url, tmp_path / "first", *args) as mnt:
        first = _tree(mnt)
    _, first_bytes = server.snapshot()
    assert len([name for name in first if not name.endswith("zarr.json")]) == 16
    server.reset()
    with mounted(url, tmp_path / "second", *args) as mnt:
        assert _tree(mnt) == first
    _, sent = server.snapshot()
    fetched = {key for (kind, key), _ in server.per_key.items() if kind == "GET"}
    assert all(key.endswith("/zarr.json") for key in fetched), fetched  # metadata is not cached
    assert sent < first_bytes / 10, (sent, first_bytes)


@pytest.mark.fuse
@pytest.mark.timeout(180)
def test_a_chunk_written_through_a_mount_is_read_new_by_the_next_mount(server, tmp_path):
    url = f"s3://{BUCKET}/written"
    zarrfuse.create_array(url, data=np.zeros((64, 64), dtype="u1"), chunks=(64, 64), fill_value=9,
                          compressors=None, storage_options={"endpoint_url": server.url})
    args = ["--cache-dir", tmp_path / "cache", "--storage-option", f"endpoint_url={server.url}"]
    with mounted(url, tmp_path / "mnt", *args) as mnt:
        [chunk] = [p for p in mnt.rglob("*") if p.is_file() and "zarr.json" not in p.name]
        assert chunk.read_bytes() == bytes(64 * 64)  # cached now
        (tmp_path / "ones").write_bytes(b"\x01" * 64 * 64)
        run_with_timeout(["cp", tmp_path / "ones", chunk])
        assert chunk.read_bytes() == b"\x01" * 64 * 64
    with mounted(url, tmp_path / "mnt", *args) as mnt:
        assert chunk.read_bytes() == b"\x01" * 64 * 64


@pytest.mark.fuse
@pytest.mark.timeout(180)
def test_with_a_metadata_ttl_the_second_mount_also_reuses_the_listings(server, tmp_path):
    """A read-only mount given ``--metadata-ttl`` trusts listings kept in the cache for that
    long: the second mount asks the server for its ``zarr.json`` and nothing else."""
    url = f"s3://{BUCKET}/ttl"
    data = np.random.default_rng(4).integers(0, 255, (256, 256), dtype="u1")
    zarrfuse.create_array(url, data=data, chunks=(64, 64), compressors=None,
                          storage_options={"endpoint_url": server.url})
    args = ["--read-only", "--cache-dir", tmp_path / "cache", "--metadata-ttl", "600",
            "--storage-option", f"endpoint_url={server.url}"]
    with mounted(url, tmp_path / "first", *args) as mnt:
        first = _tree(mnt)
    server.reset()
    with mounted(url, tmp_path / "second", *args) as mnt:
        assert _tree(mnt) == first
    counts, _ = server.snapshot()
    # The root's, and the commit journal's (a read-only mount reads a commit a crash
    # interrupted as recovery will leave it, so it looks for one at start).
    assert counts["LIST"] <= 2 and set(counts) <= {"GET", "LIST"}, counts
    fetched = {key for (kind, key), _ in server.per_key.items() if kind == "GET"}
    assert all(key.endswith("/zarr.json") for key in fetched), fetched


def _crc_sharded(url: str, data: np.ndarray, options: dict) -> None:
    """Shards stored as data + crc32c parts (``concat-parts``)."""
    zarrfuse.create_array(url, data=data, chunks=(32, 32), shards=(128, 128),
                          storage_transformers=CRC_PARTS, storage_options=options)


def _numcodecs_in_shards(url: str, data: np.ndarray, options: dict) -> None:
    """Inner chunks through a numcodecs codec: on zarr 3.1 it has no synchronous decoder, so
    the shards are read whole (through zarr, before)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs.*: "not in the v3 specification"
        zarrfuse.create_array(url, data=data, chunks=(32, 32), shards=(128, 128),
                              compressors=[numcodecs.zarr3.Zlib()], storage_options=options)


def _v2(url: str, data: np.ndarray, options: dict) -> None:
    zarrfuse.create_array(url, data=data, chunks=(32, 32), zarr_format=2, storage_options=options)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("make", "objects"), [
    (_crc_sharded, {"c/1/0", "c/1/0.crc32c"}), (_numcodecs_in_shards, {"c/1/0"}),
    (_v2, {"5.2"})], ids=["concat-parts-shards", "numcodecs-in-shards", "v2"])
def test_a_rendered_tile_is_read_through_the_mounts_backend_and_its_disk_cache(
    server, tmp_path, make, objects
):
    """A rendered view reads through the mount's backend, whatever the array: a second
    mount on the same ``--cache-dir`` draws a tile with no GET of the stored objects it is
    made from (``objects``: its shard's parts, its v2 chunk), which the first mount's read
    put in the cache (reads through zarr on the raw store went past the disk cache). Both
    mounts also render the next tiles ahead; what the first one's read-ahead had not
    finished at its unmount the second fetches, so only the tile's own objects count."""
    url = f"s3://{BUCKET}/rendered-{make.__name__}"
    options = {"endpoint_url": server.url}
    data = np.random.default_rng(5).integers(0, 60000, (256, 256)).astype("u2")
    make(url, data, options)
    config = {"format": "tiff", "read_only": True, "cache_dir": str(tmp_path / "cache"),
              "storage_options": options}
    tile = "planes/y005/y005-x002.tiff"
    expected = data[160:192, 64:96]
    with in_process(url, **config) as fs:
        np.testing.assert_array_equal(tifffile.imread(io.BytesIO(fs.read(tile))), expected)
    server.reset()
    with in_process(url, **config) as fs:
        np.testing.assert_array_equal(tifffile.imread(io.BytesIO(fs.read(tile))), expected)
    server.snapshot()
    fetched = {key for (kind, key), _ in server.per_key.items() if kind == "GET"}
    prefix = f"rendered-{make.__name__}/"
    assert not {key.split(prefix, 1)[-1] for key in fetched} & objects, fetched


@pytest.mark.timeout(180)
def test_a_tile_of_a_large_concat_parts_shard_costs_ranges_not_the_shard(server, tmp_path):
    """Through the backend (no ``--cache-dir``: its 4 MiB blocks would hide the ranges), a
    shard stored in parts is still read by ranges (its index, then the inner chunks wanted),
    never fetched whole for one tile."""
    url = f"s3://{BUCKET}/large-parts"
    data = np.random.default_rng(6).integers(0, 60000, (2048, 2048)).astype("u2")
    zarrfuse.create_array(url, data=data, chunks=(32, 32), shards=(2048, 2048),
                          compressors=None, storage_transformers=CRC_PARTS,
                          storage_options={"endpoint_url": server.url})
    server.reset()
    with in_process(url, format="tiff", read_only=True,
                    storage_options={"endpoint_url": server.url}) as fs:
        tile = tifffile.imread(io.BytesIO(fs.read("planes/y007/y007-x003.tiff")))
    np.testing.assert_array_equal(tile, data[224:256, 96:128])
    _, sent = server.snapshot()
    # The tile and the tiles of its row rendered ahead (about 1.3 MB), not the 8 MiB shard.
    assert sent < data.nbytes / 4, (sent, data.nbytes)


class HeldGets:
    """The server's app, holding every GET of a chunk until ``released``: how many a client
    has in flight at once is then how many are held."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app, self.held = app, 0
        self.released, self.changed = threading.Event(), threading.Condition()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "GET" and "/c/" in environ.get("PATH_INFO", ""):
            with self.changed:
                self.held += 1
                self.changed.notify_all()
            self.released.wait(60)
        return self.app(environ, start_response)


@pytest.mark.timeout(180)
def test_a_batch_through_the_cache_has_every_get_in_flight_and_no_thread_each(
    server, tmp_path, monkeypatch
):
    """A whole image's 64 tiles through ``--cache-dir``: their GETs are all in flight at
    once with one thread waiting for them (the store backend's batched reads), not a fetch
    pool thread per chunk; the bytes are exact and kept, a second mount asks for none. The
    cache used to hide the batched reads, and its batches took a thread per chunk."""
    url = f"s3://{BUCKET}/batched"
    options = {"endpoint_url": server.url}
    data = np.random.default_rng(7).integers(0, 60000, (256, 256)).astype("u2")
    zarrfuse.create_array(url, data=data, chunks=(32, 32), compressors=None,
                          storage_options=options)
    config = {"format": "ome-tiff", "read_only": True, "cache_dir": str(tmp_path / "cache"),
              "storage_options": options}
    gate = HeldGets(server._app)
    with in_process(url, **config) as fs, ThreadPoolExecutor(1) as reader:
        monkeypatch.setattr(server, "_app", gate)
        before = set(threading.enumerate())
        try:
            image = reader.submit(fs.read, "batched.ome.tif")
            with gate.changed:
                assert gate.changed.wait_for(lambda: gate.held >= 64, timeout=60), gate.held
            started = [t.name for t in threading.enumerate() if t not in before]
        finally:
            gate.released.set()
        np.testing.assert_array_equal(tifffile.imread(io.BytesIO(image.result(60))), data)
    assert not [name for name in started if name.startswith("zarrfuse-fetch")], started
    server.reset()
    with in_process(url, **config) as fs:
        np.testing.assert_array_equal(tifffile.imread(io.BytesIO(fs.read("batched.ome.tif"))),
                                      data)
    server.snapshot()
    assert not [key for (kind, key), _ in server.per_key.items() if kind == "GET"
                and "/c/" in key], server.per_key
