"""The concat-parts storage transformer.

Configuration, byte ranges, parts on disk, spec examples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore

import zarrfuse
from tests.stores import CountingStore, ObjectStoreLike
from zarrfuse.errors import ConfigurationError, PartsError, WriteRefusedError
from zarrfuse.extensions.concat_parts_store import ConcatPartsStore
from zarrfuse.extensions.transformers import ConcatParts, parse_storage_transformers

PROTO = default_buffer_prototype()


def concat_parts(*parts: tuple[str, int | None]) -> list[dict]:
    entries = [{"key_suffix": s} | ({} if n is None else {"size": n}) for s, n in parts]
    return [{"name": "concat-parts", "configuration": {"parts": entries}}]


CRC_PARTS = concat_parts(("", None), (".crc32c", 4))
HEADER_INDEX_PARTS = concat_parts((".header", 64), ("", None), (".index", 1604))


def stored_files(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()
    }


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, message",
    [
        ({"parts": []}, "non-empty"),
        ({}, "only 'parts'"),
        ({"parts": [{"key_suffix": ""}], "extra": 1}, "only 'parts'"),
        ({"parts": [{"key_suffix": ""}, {"key_suffix": ""}]}, "repeat"),
        ({"parts": [{"key_suffix": "/x"}]}, "contains '/'"),
        ({"parts": [{"key_suffix": ".a", "size": -1}]}, "non-negative"),
        ({"parts": [{"key_suffix": ".a", "size": 1.5}]}, "non-negative"),
        ({"parts": [{"key_suffix": ".a", "size": True}]}, "non-negative"),
        ({"parts": [{"size": 4}]}, "no 'key_suffix'"),
        ({"parts": [{"key_suffix": 3}]}, "must be a string"),
        ({"parts": [{"key_suffix": "", "sizes": 3}]}, "unknown members"),
        ({"parts": "x"}, "non-empty list"),
    ],
)
def test_invalid_configuration_is_refused(config, message):
    with pytest.raises(ConfigurationError, match=message):
        ConcatParts.from_config(config)


def test_unknown_transformer_is_named():
    with pytest.raises(ConfigurationError, match="'bitround-xyz'"):
        parse_storage_transformers([{"name": "bitround-xyz", "configuration": {}}])


def test_no_transformer_means_none():
    assert parse_storage_transformers(None) is None
    assert parse_storage_transformers([]) is None


def test_split_by_sizes():
    parts = ConcatParts.from_config(HEADER_INDEX_PARTS[0]["configuration"])
    assert parts.split(64 + 10 + 1604) == [(0, 64), (64, 74), (74, 1678)]
    assert parts.split(64 + 1604) == [(0, 64), (64, 64), (64, 1668)]
    with pytest.raises(WriteRefusedError, match="at least 1668"):
        parts.split(1667)


def test_two_unsized_parts_are_readable_but_not_writable(tmp_path):
    config = concat_parts(("", None), (".b", None))
    with pytest.raises(ConfigurationError, match="at most one may be unsized"):
        zarrfuse.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1",
                              storage_transformers=config)
    # An array written by someone else with two unsized parts still reads.
    zarr.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1", fill_value=0, compressors=None)
    meta = json.loads((tmp_path / "zarr.json").read_text())
    meta["storage_transformers"] = config
    (tmp_path / "zarr.json").write_text(json.dumps(meta))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(b"\x01")
    (tmp_path / "c" / "0.b").write_bytes(b"\x02")
    assert zarrfuse.open_array(tmp_path)[:].tolist() == [1, 2, 0, 0]
    with pytest.raises(ConfigurationError, match="at most one may be unsized"):
        zarrfuse.open_array(tmp_path, mode="r+")


# --- byte ranges: every request kind, every store, same answer as slicing -------------------

layouts = st.lists(
    st.tuples(st.integers(0, 40), st.booleans()), min_size=1, max_size=4
).map(lambda parts: [(f".p{i}", size, sized) for i, (size, sized) in enumerate(parts)])


@st.composite
def layout_and_request(draw):
    parts = draw(layouts)
    # At most one unsized part, so the layout is also writable.
    unsized = draw(st.one_of(st.none(), st.integers(0, len(parts) - 1)))
    config = [(s if i != 0 else "", None if i == unsized else n)
              for i, (s, n, _) in enumerate(parts)]
    sizes = [n for _, n, _ in parts]
    total = sum(sizes)
    kind = draw(st.sampled_from(["none", "range", "offset", "suffix"]))
    if kind == "none":
        request = None
    elif kind == "range":
        start = draw(st.integers(0, total + 5))
        request = RangeByteRequest(start, draw(st.integers(start, total + 10)))
    elif kind == "offset":
        request = OffsetByteRequest(draw(st.integers(0, total + 5)))
    else:
        request = SuffixByteRequest(draw(st.integers(0, total + 5)))
    return config, sizes, request


def reference_slice(data: bytes, request) -> bytes:
    if request is None:
        return data
    if isinstance(request, RangeByteRequest):
        return data[request.start : request.end]
    if isinstance(request, OffsetByteRequest):
        return data[request.offset :]
    return data[max(len(data) - request.suffix, 0) :] if request.suffix else b""


@pytest.mark.parametrize("backend", ["memory", "local", "object-like"])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=layout_and_request(), seed=st.integers(0, 2**32 - 1))
def test_byte_ranges_match_slicing(backend, case, seed, tmp_path_factory):
    config, sizes, request = case
    inner = MemoryStore() if backend == "memory" else LocalStore(tmp_path_factory.mktemp("parts"))
    if backend == "object-like":
        inner = ObjectStoreLike(inner)
    parts = ConcatParts.from_config(concat_parts(*config)[0]["configuration"])
    store = ConcatPartsStore(inner, array_path="a", parts=parts,
                             metadata={"shape": [100], "chunk_key_encoding": {"name": "default"}})
    data = np.random.default_rng(seed).bytes(sum(sizes))
    sync(store.set("a/c/3", PROTO.buffer.from_bytes(data)))
    got = sync(store.get("a/c/3", PROTO, request))
    assert got is not None
    assert got.to_bytes() == reference_slice(data, request)


# --- parts on disk -----------------------------------------------------------------------------


def test_part_key_is_full_encoded_key_plus_key_suffix(tmp_path):
    encoding = {"name": "suffix", "configuration": {
        "suffix": ".tiff",
        "base_encoding": {"name": "fanout", "configuration": {"max_children": 1000}}}}
    a = zarrfuse.create_array(
        tmp_path, shape=(4000, 2000), chunks=(1, 1), dtype="u1", fill_value=0,
        chunk_key_encoding=encoding, compressors=None,
        storage_transformers=concat_parts((".header", 0), ("", None)))
    a[3, 1500] = 7
    assert stored_files(tmp_path).keys() >= {
        "c/0/003/1/001/500.tiff.header", "c/0/003/1/001/500.tiff"}
    assert zarrfuse.open_array(tmp_path)[3, 1500] == 7


def test_missing_parts(tmp_path):
    a = zarrfuse.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1", fill_value=9,
                              compressors=[Crc32cCodec()], storage_transformers=CRC_PARTS)
    a[:] = [1, 2, 3, 4]
    # All parts of a chunk absent: the chunk is absent and reads as the fill value.
    (tmp_path / "c" / "1").unlink()
    (tmp_path / "c" / "1.crc32c").unlink()
    assert zarrfuse.open_array(tmp_path)[:].tolist() == [1, 2, 9, 9]
    # One part absent: an error naming the key, never fill value or garbage.
    (tmp_path / "c" / "0.crc32c").unlink()
    with pytest.raises(PartsError, match=r"c/0\.crc32c"):
        zarrfuse.open_array(tmp_path)[:]


def test_sized_part_of_wrong_size(tmp_path):
    a = zarrfuse.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1",
                              compressors=[Crc32cCodec()], storage_transformers=CRC_PARTS)
    a[:] = [1, 2, 3, 4]
    (tmp_path / "c" / "0.crc32c").write_bytes(b"\x00\x01\x02\x03\x04")
    with pytest.raises(PartsError, match=r"c/0\.crc32c.*5 bytes where 4"):
        zarrfuse.open_array(tmp_path)[:]


def test_short_value_is_refused_and_nothing_written(tmp_path):
    parts = ConcatParts.from_config(HEADER_INDEX_PARTS[0]["configuration"])
    store = ConcatPartsStore(LocalStore(tmp_path), array_path="", parts=parts,
                             metadata={"shape": [4], "chunk_key_encoding": {"name": "default"}})
    sync(store.set("c/0", PROTO.buffer.from_bytes(b"x" * 1668)))
    before = stored_files(tmp_path)
    with pytest.raises(WriteRefusedError, match="1000 bytes"):
        sync(store.set("c/0", PROTO.buffer.from_bytes(b"y" * 1000)))
    assert stored_files(tmp_path) == before
    assert sync(store.get("c/0", PROTO)).to_bytes() == b"x" * 1668


def test_delete_removes_every_part_and_listing_is_logical(tmp_path):
    a = zarrfuse.create_array(tmp_path, shape=(6,), chunks=(2,), dtype="u1", fill_value=0,
                              compressors=[Crc32cCodec()], storage_transformers=CRC_PARTS)
    a[:] = [1, 1, 2, 2, 3, 3]
    (tmp_path / "c" / "0.1234abcd.partial").write_bytes(b"temp")  # LocalStore's temp files
    (tmp_path / "c" / "stray").write_bytes(b"?")
    store = a.store

    async def listing(it):
        return sorted([k async for k in it])

    assert sync(listing(store.list())) == ["c/0", "c/1", "c/2", "zarr.json"]
    assert sync(listing(store.list_dir("c"))) == ["0", "1", "2"]
    assert sync(listing(store.list_dir(""))) == ["c", "zarr.json"]
    a[2:4] = 0  # all fill value: zarr deletes the chunk, which must remove both parts
    files = stored_files(tmp_path)
    assert "c/1" not in files and "c/1.crc32c" not in files
    assert {"c/0", "c/0.crc32c", "c/2", "c/2.crc32c"} <= files.keys()


def test_read_only_mode_refuses_writes(tmp_path):
    zarrfuse.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1",
                          storage_transformers=CRC_PARTS)
    a = zarrfuse.open_array(tmp_path)
    with pytest.raises(ValueError):
        a[:] = 1
    assert not any(k.startswith("c/") for k in stored_files(tmp_path))


def test_metadata_round_trip_keeps_transformer(tmp_path):
    zarrfuse.create_array(tmp_path, shape=(4,), chunks=(2,), dtype="u1",
                          storage_transformers=CRC_PARTS)
    a = zarrfuse.open_array(tmp_path, mode="r+")
    a.attrs["note"] = "kept"  # rewrites zarr.json through the wrapper
    meta = json.loads((tmp_path / "zarr.json").read_text())
    assert meta["storage_transformers"] == CRC_PARTS
    assert meta["attributes"] == {"note": "kept"}
    assert a.metadata.storage_transformers == ()


def test_array_in_a_group(tmp_path):
    zarr.create_group(tmp_path)
    a = zarrfuse.create_array(tmp_path, name="sub/img", shape=(4,), chunks=(2,), dtype="u1",
                              storage_transformers=CRC_PARTS)
    a[:] = [5, 6, 7, 8]
    assert (tmp_path / "sub" / "img" / "c" / "1.crc32c").stat().st_size == 4
    assert zarrfuse.open_array(tmp_path / "sub" / "img")[:].tolist() == [5, 6, 7, 8]


# --- the two examples of concat-parts-storage-transformer.md ---------------------------------


def test_spec_example_zstd_crc32c(tmp_path):
    data = np.random.default_rng(1).integers(0, 8, (1000, 1000), dtype="u1")
    a = zarrfuse.create_array(tmp_path, shape=(1000, 1000), chunks=(500, 500), dtype="uint8",
                              chunk_key_encoding={"name": "default", "separator": "/"},
                              compressors=[ZstdCodec(), Crc32cCodec()],
                              storage_transformers=CRC_PARTS)
    a[:] = data
    files = stored_files(tmp_path)
    for i in range(2):
        for j in range(2):
            assert files[f"c/{i}/{j}.crc32c"] == 4
            assert files[f"c/{i}/{j}"] > 0
    meta = json.loads((tmp_path / "zarr.json").read_text())
    assert [c["name"] for c in meta["codecs"]] == ["bytes", "zstd", "crc32c"]
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path)[:], data)
    # A corrupted checksum part is detected on read.
    crc = tmp_path / "c" / "0" / "1.crc32c"
    crc.write_bytes(bytes(b ^ 0xFF for b in crc.read_bytes()))
    with pytest.raises(ValueError, match="checksum"):
        zarrfuse.open_array(tmp_path)[0:500, 500:1000]
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path)[0:500, 0:500], data[:500, :500])


def test_spec_example_sharding_header_index(tmp_path):
    """The spec's shard layout: 64-byte header, tiles, 1604-byte index (100 inner chunks).

    zarr-python has no ``packbits`` codec, so the inner chunks use ``bytes`` alone.
    """
    a = zarrfuse.create_array(
        tmp_path, shape=(10000, 10000), dtype="uint8", fill_value=0,
        chunk_key_encoding={"name": "default"},
        serializer=BytesCodec(), shards=(5000, 5000), chunks=(500, 500), compressors=None,
        storage_transformers=HEADER_INDEX_PARTS)
    rng = np.random.default_rng(2)
    block = rng.integers(1, 255, (1000, 1000), dtype="u1")
    corner = rng.integers(1, 255, (500, 500), dtype="u1")
    a[0:1000, 0:1000] = block
    a[9500:10000, 5000:5500] = corner
    meta = json.loads((tmp_path / "zarr.json").read_text())
    assert meta["codecs"][0]["name"] == "sharding_indexed"
    assert meta["codecs"][0]["configuration"]["index_location"] == "end"
    files = stored_files(tmp_path)
    assert files["c/0/0.header"] == 64 and files["c/0/0.index"] == 1604
    assert files["c/0/0"] == 4 * 500 * 500 - 64
    assert files["c/1/1.index"] == 1604
    assert "c/0/1" not in files and "c/0/1.index" not in files

    counting = CountingStore(LocalStore(tmp_path, read_only=True))
    b = zarrfuse.open_array(counting)
    np.testing.assert_array_equal(b[500:1000, 500:1000], block[500:, 500:])
    # One inner chunk: the index, served from the .index part alone, and one 250000-byte range
    # of the tiles part; never the whole 1 MB shard.
    assert counting.chunk_bytes() == 1604 + 500 * 500
    chunk_requests = [(k, r) for k, r, _ in counting.requests if not k.endswith("zarr.json")]
    assert len(chunk_requests) == 2
    assert ("c/0/0.index", None) in chunk_requests
    (_tiles_key, tiles_range), = [(k, r) for k, r in chunk_requests if k == "c/0/0"]
    assert isinstance(tiles_range, RangeByteRequest)
    assert tiles_range.end - tiles_range.start == 500 * 500
    np.testing.assert_array_equal(b[9500:10000, 5000:5500], corner)
    assert b[5000:5100, 0:100].sum() == 0


def test_open_array_errors(tmp_path):
    with pytest.raises(zarrfuse.errors.SourceError, match=r"no zarr\.json"):
        zarrfuse.open_array(tmp_path)
    (tmp_path / "zarr.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        zarrfuse.open_array(tmp_path)
    (tmp_path / "zarr.json").write_text(json.dumps({"zarr_format": 2}))
    with pytest.raises(ConfigurationError, match="zarr_format is 2"):
        zarrfuse.open_array(tmp_path)
    os.remove(tmp_path / "zarr.json")
    zarr.create_group(tmp_path)
    with pytest.raises(zarrfuse.errors.SourceError, match="group"):
        zarrfuse.open_array(tmp_path)
