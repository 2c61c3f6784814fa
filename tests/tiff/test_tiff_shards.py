"""Dual-access arrays: every shard file is a TIFF that real readers (tifffile, Pillow, libtiff's
tiffinfo) read as the array's region, on disk and through the raw mount; zarr reads the same
bytes; writes through zarrfuse keep it so. Both parts layouts: header with the tiles (the shard
file on disk is the TIFF) and header in its own ``.header`` part (the assembled shard is)."""

from __future__ import annotations

import errno
import json
import zlib

import numpy as np
import pytest
import tifffile
import zarr

import zarrfuse
from tests.mounting import ZARRFUSE, run_with_timeout
from tests.tiff.shards import (
    CASES,
    HEADER_PART,
    check_shards,
    make,
    sample,
    stored_bytes,
    tiff_file,
    write_parts,
)
from zarrfuse.errors import ConfigurationError, Exists, FileTooBig, WriteRefusedError
from zarrfuse.tiff import shard_format as tiff_shards
from zarrfuse.tiff.arrays import (
    create_tiff_array,
    repair_tiff_headers,
    shard_format_of,
)
from zarrfuse.tiff.shard_format import CLASSIC_LIMIT, bigtiff_needed

pytestmark = pytest.mark.timeout(120)


@HEADER_PART
@pytest.mark.parametrize("compression", ["none", "deflate", "zstd"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_shard_file_on_disk_is_the_tiff_of_its_region(
    tmp_path, case, compression, header_part
):
    array, data = make(tmp_path / "a", case, compression, header_part=header_part)
    layout = shard_format_of(tmp_path / "a")
    assert layout.header_part is header_part
    assert check_shards(tmp_path / "a", array, layout, data) > 0
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)
    key = array.metadata.encode_chunk_key((0,) * data.ndim)
    headers = sorted(p.name for p in (tmp_path / "a").rglob("*.header"))
    if header_part:  # every stored shard has its .header file; the tile file alone is no TIFF
        assert len(headers) == len(list((tmp_path / "a").rglob("*.index"))) > 0
        with pytest.raises(tifffile.TiffFileError):
            tifffile.imread(tmp_path / "a" / key)
    else:
        assert headers == []
    page = tifffile.TiffFile(tiff_file(tmp_path / "a", key, layout))
    with page:
        assert page.pages[0].compression == {"none": 1, "deflate": 8, "zstd": 50000}[compression]
        assert page.byteorder == (">" if case == "big-endian" else "<")


def _with_header(layout, coords, value: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """The stored value of a shard: the one finisher interface, on one bytes value."""
    return b"".join(layout.shard_with_header(coords, [memoryview(value)]))


def test_deflate_tiles_are_the_zlib_streams_tiff_compression_8_names(tmp_path):
    """TIFF's Adobe Deflate (8) is a zlib stream (RFC 1950) per tile, as libtiff writes it;
    not a gzip member or raw deflate. Each tile the header points at, the fill tile too."""
    array = create_tiff_array(tmp_path / "a", shape=(64, 48), dtype="uint16",
                              tile_shape=(32, 16), compression="deflate")
    data = sample((64, 48), "uint16")
    data[:32, :16] = 0  # the first tile: absent from the shard, shown as the fill tile
    array[...] = data
    metadata = json.loads((tmp_path / "a" / "zarr.json").read_text())
    inner = metadata["codecs"][0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["bytes", "numcodecs.zlib"]
    shard = (tmp_path / "a" / array.metadata.encode_chunk_key((0, 0))).read_bytes()
    with tifffile.TiffFile(tmp_path / "a" / array.metadata.encode_chunk_key((0, 0))) as tif:
        page = tif.pages[0]
        spans = list(zip(page.dataoffsets, page.databytecounts, strict=True))
    assert page.compression == 8 and len(spans) == 6 and len(set(spans)) == 6
    tiles = [data[y : y + 32, x : x + 16] for y in (0, 32) for x in (0, 16, 32)]
    for (offset, count), tile in zip(spans, tiles, strict=True):
        stream = shard[offset : offset + count]
        assert stream[0] & 0x0F == 8 and int.from_bytes(stream[:2], "big") % 31 == 0
        decoder = zlib.decompressobj()  # wbits 15: zlib header and Adler-32 trailer required
        assert decoder.decompress(stream) == tile.astype("<u2").tobytes()
        assert decoder.eof and decoder.unused_data == b""


@HEADER_PART
def test_absent_tiles_point_at_one_stored_fill_tile(tmp_path, header_part):
    """zarr leaves all-zero tiles out of a shard; libtiff refuses tiles of 0 bytes, so the
    TIFF view points them at one zero tile stored behind the others."""
    array = create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="uint16",
                              tile_shape=(16, 16), compression="none", header_part=header_part)
    data = np.zeros((64, 64), "uint16")
    data[16:32, 32:48] = 7
    array[...] = data
    key = array.metadata.encode_chunk_key((0, 0))
    shard = tmp_path / "a" / key
    layout = shard_format_of(tmp_path / "a")
    with tifffile.TiffFile(tiff_file(tmp_path / "a", key, layout)) as tif:
        offsets = tif.pages[0].dataoffsets
    assert len(set(offsets)) == 2  # the one stored tile, and the shared fill tile
    # With a .header part the shard file holds nothing but the tiles.
    header_in_file = 0 if header_part else layout.header_size
    assert shard.stat().st_size == header_in_file + 2 * 16 * 16 * 2
    assert check_shards(tmp_path / "a", array, layout, data) == 1


@HEADER_PART
def test_rebuilding_is_idempotent_and_refuses_what_is_no_shard(tmp_path, header_part):
    array, data = make(tmp_path / "a", "2d-uint16", "zstd", header_part=header_part)
    layout = shard_format_of(tmp_path / "a")
    key = array.metadata.encode_chunk_key((1, 1))
    stored = stored_bytes(tmp_path / "a", key, layout)
    assert _with_header(layout, (1, 1), stored) == stored
    # The same shard as zarr writes it (tiles from offset 0) gets the very same bytes.
    zarr_layout = zarr.create_array(zarr.storage.MemoryStore(), shape=(64, 96), dtype="uint16",
                                    chunks=(16, 16), shards=(64, 96),
                                    serializer=zarr.codecs.BytesCodec(), compressors=None)
    zarr_layout[...] = data[layout.region((1, 1))]
    plain = zarr.core.sync.sync(zarr_layout.store.get(
        "c/0/0", zarr.core.buffer.default_buffer_prototype())).to_bytes()
    rebuilt = _with_header(layout, (1, 1), plain)
    assert _with_header(layout, (1, 1), rebuilt) == rebuilt
    assert rebuilt[: layout.header_size] != plain[: layout.header_size]
    with pytest.raises(WriteRefusedError, match="crc32c"):
        _with_header(layout, (1, 1), stored[:-1] + bytes([stored[-1] ^ 1]))
    with pytest.raises(WriteRefusedError, match="index"):
        _with_header(layout, (1, 1), b"short")


def test_bigtiff_is_chosen_by_size_and_readable(tmp_path):
    array, data = make(tmp_path / "big", "2d-uint16", "zstd", bigtiff_threshold=10_000)
    layout = shard_format_of(tmp_path / "big")
    assert layout.bigtiff
    with tifffile.TiffFile(tmp_path / "big" / array.metadata.encode_chunk_key((0, 0))) as tif:
        assert tif.is_bigtiff
    check_shards(tmp_path / "big", array, layout, data)
    _small, _ = make(tmp_path / "small", "2d-uint16", "zstd")
    assert not shard_format_of(tmp_path / "small").bigtiff
    # The decision without writing 4 GiB: 64k x 64k uint8 tiles reach 4 GiB, 32k x 32k not.
    for side, expected in ((65536, True), (32768, False)):
        huge = shard_format_of(tmp_path / "small").__class__(
            shape=(side, side), shard_shape=(side, side), tile_shape=(256, 256),
            dtype=np.dtype("uint8"), byteorder="<", compression="zstd", samples=False,
            bigtiff=False)
        assert bigtiff_needed(huge, CLASSIC_LIMIT) is expected


@HEADER_PART
def test_writes_through_open_array_keep_every_shard_a_tiff(tmp_path, header_part):
    array, data = make(tmp_path / "a", "3d-pages", "zstd", header_part=header_part)
    again = zarrfuse.open_array(tmp_path / "a", mode="r+")
    data[1:4, 10:35, 5:60] = -5  # crosses shards, pages and tiles, partly
    again[1:4, 10:35, 5:60] = -5
    data[0] = 0  # whole pages become fill value
    again[0] = 0
    check_shards(tmp_path / "a", array, shard_format_of(tmp_path / "a"), data)
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)


@HEADER_PART
def test_repair_rebuilds_headers_left_stale_by_other_writers_and_resizes(tmp_path, header_part):
    array, data = make(tmp_path / "a", "2d-uint16", "none", header_part=header_part)
    layout = shard_format_of(tmp_path / "a")
    key = array.metadata.encode_chunk_key((0, 0))
    # Another Zarr implementation with concat-parts writes zarr's layout, split into parts:
    # the data stays valid for zarr; the TIFF view is garbage.
    zarr_layout = zarr.create_array(zarr.storage.MemoryStore(), shape=(64, 96), dtype="uint16",
                                    chunks=(16, 16), shards=(64, 96),
                                    serializer=zarr.codecs.BytesCodec(), compressors=None)
    data[:64, :96] = 9
    zarr_layout[...] = data[:64, :96]
    plain = zarr.core.sync.sync(zarr_layout.store.get(
        "c/0/0", zarr.core.buffer.default_buffer_prototype())).to_bytes()
    write_parts(tmp_path / "a", key, layout, plain)
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)
    with pytest.raises(tifffile.TiffFileError):
        tifffile.imread(tiff_file(tmp_path / "a", key, layout))
    stale = run_with_timeout([*ZARRFUSE, "repair-tiff", "--check", tmp_path / "a"], check=False)
    assert stale.returncode == 1 and "9 shards checked, 1 TIFF headers stale" in stale.stdout
    repaired = run_with_timeout([*ZARRFUSE, "repair-tiff", tmp_path / "a"])
    assert "9 shards checked, 1 TIFF headers rewritten" in repaired.stdout
    assert repair_tiff_headers(tmp_path / "a", check_only=True) == (9, 0, [])
    check_shards(tmp_path / "a", array, layout, data)
    # Growing the array changes what the edge shards show: repair rewrites their headers.
    zarrfuse.open_array(tmp_path / "a", mode="r+").resize((150, 230))
    grown = np.zeros((150, 230), data.dtype)
    grown[:, :200] = data
    _checked, rewritten, unreadable = repair_tiff_headers(tmp_path / "a")
    assert rewritten == 3 and unreadable == []
    check_shards(tmp_path / "a", array, shard_format_of(tmp_path / "a"), grown)


def test_repair_reports_a_corrupt_shard_and_checks_the_others(tmp_path):
    array, _ = make(tmp_path / "a", "2d-uint16", "none")
    key = array.metadata.encode_chunk_key((0, 0))
    index = tmp_path / "a" / f"{key}.index"
    damaged = bytearray(index.read_bytes())
    damaged[0] ^= 0xFF  # the index no longer matches its crc32c
    index.write_bytes(bytes(damaged))
    found = repair_tiff_headers(tmp_path / "a", check_only=True)
    assert found.checked == 8 and found.stale == 0
    assert len(found.unreadable) == 1 and found.unreadable[0].startswith(key)
    result = run_with_timeout([*ZARRFUSE, "repair-tiff", tmp_path / "a"], check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(f"FAILED {key}: ") and "crc32c" in result.stderr
    assert "8 shards checked, 0 TIFF headers rewritten, 1 unreadable" in result.stdout
    assert index.read_bytes() == bytes(damaged)  # left as it was


def test_a_classic_tiff_shard_over_the_limit_is_efbig(tmp_path, monkeypatch):
    """Classic TIFF offsets end at 4 GiB; a shard past them is 'too big' (EFBIG), shown
    here with the limit lowered to 100 bytes rather than a 4 GiB shard."""
    array, _ = make(tmp_path / "a", "2d-uint16", "none")
    layout = shard_format_of(tmp_path / "a")
    key = array.metadata.encode_chunk_key((0, 0))
    shard = stored_bytes(tmp_path / "a", key, layout)
    monkeypatch.setattr(tiff_shards, "CLASSIC_LIMIT", 100)
    with pytest.raises(FileTooBig) as raised:
        _with_header(layout, (0, 0), shard)
    assert raised.value.errno == errno.EFBIG


def test_tile_shape_must_be_two_values(tmp_path):
    with pytest.raises(ConfigurationError, match="tile_shape must be"):
        create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="u1", tile_shape=(16, 16, 3))
    result = run_with_timeout([*ZARRFUSE, "convert-tiff", "--tile", "256", tmp_path / "x",
                               tmp_path / "y"], check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr


def test_creation_refuses_what_tiff_cannot_hold(tmp_path):
    with pytest.raises(ConfigurationError, match="multiples of 16"):
        create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="u1", tile_shape=(20, 16))
    with pytest.raises(ConfigurationError, match="2 dimensions at least"):
        create_tiff_array(tmp_path / "a", shape=(64,), dtype="u1")
    with pytest.raises(ConfigurationError, match="no TIFF sample format"):
        create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="complex64")
    with pytest.raises(ConfigurationError, match="multiple of the tile"):
        create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="u1", tile_shape=(16, 16),
                          shard_shape=(24, 32))
    create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="u1")
    with pytest.raises(Exists, match="overwrite"):
        create_tiff_array(tmp_path / "a", shape=(64, 64), dtype="u1")
