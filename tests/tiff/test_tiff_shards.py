"""Dual-access arrays: every shard file is a TIFF that real readers (tifffile, Pillow, libtiff's
tiffinfo) read as the array's region, on disk and through the raw mount; zarr reads the same
bytes; writes through zarrfuse keep it so. Both parts layouts: header with the tiles (the shard
file on disk is the TIFF) and header in its own ``.header`` part (the assembled shard is)."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

import zarrfuse
from tests.mounting import ZARRFUSE, mounted, run_with_timeout
from zarrfuse.errors import ConfigurationError, Exists, FileTooBig, WriteRefusedError
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.tiff import layout as tiff_shards
from zarrfuse.tiff.arrays import (
    convert_to_tiff_array,
    create_tiff_array,
    layout_of,
    repair_tiff_headers,
    shard_grid,
)
from zarrfuse.tiff.layout import CLASSIC_LIMIT, bigtiff_needed

pytestmark = pytest.mark.timeout(120)

# (shape, dtype, extra arguments of create_tiff_array): edges in every case (shapes are not
# multiples of the shard), pages, samples (RGB, RGBA), big endian.
CASES = {
    "2d-uint16": ((150, 200), "uint16", {"shard_shape": (64, 96)}),
    "2d-uint8": ((70, 50), "uint8", {}),
    "3d-one-page": ((3, 40, 50), "float32", {}),
    "3d-pages": ((5, 40, 50), "int16", {"shard_shape": (2, 32, 64)}),
    "4d-pages": ((2, 3, 40, 20), "uint16", {"shard_shape": (2, 2, 32, 32)}),
    "rgb": ((40, 70, 3), "uint8", {"samples": True, "shard_shape": (32, 64, 3)}),
    "rgba-pages": ((3, 40, 20, 4), "uint16", {"samples": True, "shard_shape": (2, 32, 32, 4)}),
    "big-endian": ((40, 50), ">u2", {"endian": "big"}),
}


def sample(shape, dtype, *, samples=False, seed=0) -> np.ndarray:
    """Random values, with the first tile of every page all zero (left out by zarr)."""
    data = (np.random.default_rng(seed).random(shape) * 200 + 1).astype(dtype)
    data[(..., slice(0, 16), slice(0, 16), *((slice(None),) if samples else ()))] = 0
    return data


def make(
    path: Path, case: str, compression: str, *, seed: int = 0, **extra
) -> tuple[zarr.Array, np.ndarray]:
    shape, dtype, kwargs = CASES[case]
    array = create_tiff_array(
        path, shape=shape, dtype=dtype, tile_shape=(16, 16), compression=compression,
        **kwargs, **extra,
    )
    data = sample(shape, dtype, samples=kwargs.get("samples", False), seed=seed)
    array[...] = data
    return array, data


def pillow_pixels(path: Path) -> np.ndarray:
    with open(path, "rb") as f:  # our handle: Pillow keeps files it opened itself
        image = Image.open(f)
        image.load()
        return np.asarray(image)


def tiffinfo_problems(path: Path) -> str:
    """libtiff's complaints (errors and warnings) when it reads every tile."""
    result = run_with_timeout(["tiffinfo", "-D", path], check=False)
    return "" if result.returncode == 0 and not result.stderr.strip() else result.stderr or "rc"


HEADER_PART = pytest.mark.parametrize(
    "header_part", [False, True], ids=["tiff-file", "header-part"]
)


def stored_bytes(root: Path, key: str, layout) -> bytes:
    """A shard as stored on disk: its parts' files, concatenated in order."""
    return b"".join((root / f"{key}{p['key_suffix']}").read_bytes() for p in layout.parts)


def write_parts(root: Path, key: str, layout, value: bytes) -> None:
    """Store ``value`` as the shard's parts, as any concat-parts writer would."""
    spans = ConcatParts.from_config({"parts": layout.parts}).split(len(value))
    for part, (start, stop) in zip(layout.parts, spans, strict=True):
        (root / f"{key}{part['key_suffix']}").write_bytes(value[start:stop])


def tiff_file(root: Path, key: str, layout, *, mount: bool = False) -> Path:
    """The file that is the shard's TIFF: the shard file itself through a mount or with the
    header in it; with a ``.header`` part on disk, header and tiles concatenated (a copy next
    to ``root``), after checking the ``.header`` file has the fixed size."""
    path = root / key
    if mount or not layout.header_part or not path.exists():
        return path
    header = root / f"{key}.header"
    assert header.stat().st_size == layout.header_size, f"{header} size"
    assembled = root.with_name(f"{root.name}.assembled") / key
    assembled.parent.mkdir(parents=True, exist_ok=True)
    assembled.write_bytes(header.read_bytes() + path.read_bytes())
    return assembled


def check_shards(
    root: Path, keys_from: zarr.Array, layout, data: np.ndarray, *, mount: bool = False
) -> int:
    """Every stored shard under ``root`` (keys as ``keys_from`` names them) reads, in every
    TIFF reader, as its region of ``data``: the shard file through a mount, its header and
    tiles assembled on disk (:func:`tiff_file`). Returns how many shards were checked."""
    checked = 0
    for coords in shard_grid(layout):
        path = tiff_file(root, keys_from.metadata.encode_chunk_key(coords), layout, mount=mount)
        region = data[layout.region(coords)]
        if not path.exists():
            assert not region.any(), f"shard {coords} is missing but not all fill value"
            continue
        np.testing.assert_array_equal(tifffile.imread(path), region, err_msg=str(coords))
        assert tiffinfo_problems(path) == "", f"tiffinfo on shard {coords}"
        plane = region.ndim - (3 if layout.samples else 2)
        if region.shape[:plane] == (1,) * plane:  # one page: Pillow reads it
            image = region.reshape(region.shape[plane:])
            gray = image.ndim == 2 and image.dtype.kind == "u" and image.dtype.itemsize <= 2
            if gray or image.dtype == np.uint8:
                np.testing.assert_array_equal(pillow_pixels(path), image, err_msg=str(coords))
        checked += 1
    return checked


@HEADER_PART
@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_shard_file_on_disk_is_the_tiff_of_its_region(
    tmp_path, case, compression, header_part
):
    array, data = make(tmp_path / "a", case, compression, header_part=header_part)
    layout = layout_of(tmp_path / "a")
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
        assert page.pages[0].compression == (50000 if compression == "zstd" else 1)
        assert page.byteorder == (">" if case == "big-endian" else "<")


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
    layout = layout_of(tmp_path / "a")
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
    layout = layout_of(tmp_path / "a")
    key = array.metadata.encode_chunk_key((1, 1))
    stored = stored_bytes(tmp_path / "a", key, layout)
    assert layout.shard_bytes_with_header((1, 1), stored) == stored
    # The same shard as zarr writes it (tiles from offset 0) gets the very same bytes.
    zarr_layout = zarr.create_array(zarr.storage.MemoryStore(), shape=(64, 96), dtype="uint16",
                                    chunks=(16, 16), shards=(64, 96),
                                    serializer=zarr.codecs.BytesCodec(), compressors=None)
    zarr_layout[...] = data[layout.region((1, 1))]
    plain = zarr.core.sync.sync(zarr_layout.store.get(
        "c/0/0", zarr.core.buffer.default_buffer_prototype())).to_bytes()
    rebuilt = layout.shard_bytes_with_header((1, 1), plain)
    assert layout.shard_bytes_with_header((1, 1), rebuilt) == rebuilt
    assert rebuilt[: layout.header_size] != plain[: layout.header_size]
    with pytest.raises(WriteRefusedError, match="crc32c"):
        layout.shard_bytes_with_header((1, 1), stored[:-1] + bytes([stored[-1] ^ 1]))
    with pytest.raises(WriteRefusedError, match="index"):
        layout.shard_bytes_with_header((1, 1), b"short")


def test_bigtiff_is_chosen_by_size_and_readable(tmp_path):
    array, data = make(tmp_path / "big", "2d-uint16", "zstd", bigtiff_threshold=10_000)
    layout = layout_of(tmp_path / "big")
    assert layout.bigtiff
    with tifffile.TiffFile(tmp_path / "big" / array.metadata.encode_chunk_key((0, 0))) as tif:
        assert tif.is_bigtiff
    check_shards(tmp_path / "big", array, layout, data)
    _small, _ = make(tmp_path / "small", "2d-uint16", "zstd")
    assert not layout_of(tmp_path / "small").bigtiff
    # The decision without writing 4 GiB: 64k x 64k uint8 tiles reach 4 GiB, 32k x 32k not.
    for side, expected in ((65536, True), (32768, False)):
        huge = layout_of(tmp_path / "small").__class__(
            shape=(side, side), shard_shape=(side, side), tile_shape=(256, 256),
            dtype=np.dtype("uint8"), byteorder="<", zstd=True, samples=False, bigtiff=False)
        assert bigtiff_needed(huge, CLASSIC_LIMIT) is expected


@HEADER_PART
def test_writes_through_open_array_keep_every_shard_a_tiff(tmp_path, header_part):
    array, data = make(tmp_path / "a", "3d-pages", "zstd", header_part=header_part)
    again = zarrfuse.open_array(tmp_path / "a", mode="r+")
    data[1:4, 10:35, 5:60] = -5  # crosses shards, pages and tiles, partly
    again[1:4, 10:35, 5:60] = -5
    data[0] = 0  # whole pages become fill value
    again[0] = 0
    check_shards(tmp_path / "a", array, layout_of(tmp_path / "a"), data)
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)


@HEADER_PART
def test_repair_rebuilds_headers_left_stale_by_other_writers_and_resizes(tmp_path, header_part):
    array, data = make(tmp_path / "a", "2d-uint16", "none", header_part=header_part)
    layout = layout_of(tmp_path / "a")
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
    check_shards(tmp_path / "a", array, layout_of(tmp_path / "a"), grown)


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
    layout = layout_of(tmp_path / "a")
    key = array.metadata.encode_chunk_key((0, 0))
    shard = stored_bytes(tmp_path / "a", key, layout)
    monkeypatch.setattr(tiff_shards, "CLASSIC_LIMIT", 100)
    with pytest.raises(FileTooBig) as raised:
        layout.shard_bytes_with_header((0, 0), shard)
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


def test_info_says_whether_and_why_not(tmp_path, array_v3):
    make(tmp_path / "tiff", "rgb", "zstd")
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "tiff"])
    assert "dual-access (shards are TIFF files): yes: classic TIFF" in result.stdout
    assert "3 samples per pixel" in result.stdout and "zstd" in result.stdout
    assert "header in the shard file: shard files are TIFFs on disk too" in result.stdout
    make(tmp_path / "parts", "2d-uint8", "none", header_part=True)
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "parts"])
    assert "files): yes: classic TIFF" in result.stdout
    assert "header in its own part (.header): shard files are TIFFs only when assembled" in (
        result.stdout
    )
    # Any other parts layout is not dual-access: here the header part without its size.
    metadata = json.loads((tmp_path / "parts" / "zarr.json").read_text())
    del metadata["storage_transformers"][0]["configuration"]["parts"][0]["size"]
    (tmp_path / "parts" / "zarr.json").write_text(json.dumps(metadata))
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "parts"])
    assert "files): no: its concat-parts parts are [('.header', None)" in result.stdout
    result = run_with_timeout([*ZARRFUSE, "info", array_v3])
    assert "dual-access (shards are TIFF files): no: it has no 'zarrfuse.tiff_shards'" in (
        result.stdout
    )
    # Declared, but its codecs are not TIFF's: the reason names them.
    plain = zarrfuse.create_array(
        tmp_path / "crc", shape=(32, 32), dtype="u1", chunks=(16, 16), shards=(32, 32),
        compressors=[zarr.codecs.GzipCodec()], attributes={"zarrfuse.tiff_shards": {}},
        chunk_key_encoding={"name": "suffix", "configuration": {"suffix": ".tiff"}},
    )
    assert plain.shape == (32, 32)
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "crc"])
    assert "no: its inner codecs are ['bytes', 'gzip']" in result.stdout
    # A group: each array below it.
    group = zarr.open_group(tmp_path / "group", mode="w")
    group.create_array("plain", shape=(4,), dtype="u1")
    make(tmp_path / "group" / "image", "2d-uint8", "none")
    out = run_with_timeout([*ZARRFUSE, "info", tmp_path / "group"]).stdout
    assert out.count("dual-access (shards are TIFF files):") == 2
    assert "image: Zarr v3 array" in out and "files): yes" in out


def test_cli_converts_an_array_and_a_tiff_file(tmp_path, array_v3):
    source = zarr.create_array(tmp_path / "src", shape=(3, 50, 70), chunks=(1, 25, 35),
                               dtype="uint16", fill_value=3)
    data = sample((3, 50, 70), "uint16")
    data[2] = 3  # the source's fill value: still converted as data
    source[...] = data
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "src", tmp_path / "dst",
                      "--tile", "16,32", "--compression", "none"])
    converted = zarrfuse.open_array(tmp_path / "dst")
    np.testing.assert_array_equal(converted[...], data)
    check_shards(tmp_path / "dst", converted, layout_of(tmp_path / "dst"), data)
    rgb = sample((60, 90, 3), "uint8", seed=4)
    tifffile.imwrite(tmp_path / "photo.tif", rgb, photometric="rgb")
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "photo.tif", tmp_path / "photo",
                      "--tile", "32,32"])
    photo = zarrfuse.open_array(tmp_path / "photo")
    layout = layout_of(tmp_path / "photo")
    assert layout.samples and layout.zstd
    check_shards(tmp_path / "photo", photo, layout, rgb)
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "photo.tif", tmp_path / "parts",
                      "--tile", "32,32", "--shard-shape", "32,64,3", "--header-part"])
    parts = zarrfuse.open_array(tmp_path / "parts")
    layout = layout_of(tmp_path / "parts")
    assert layout.header_part and layout.samples
    assert len(list((tmp_path / "parts").rglob("*.tiff.header"))) == 4  # edge shards too
    check_shards(tmp_path / "parts", parts, layout, rgb)
    np.testing.assert_array_equal(parts[...], rgb)
    again = run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "photo.tif",
                              tmp_path / "photo"], check=False)
    assert again.returncode == 1 and "already there" in again.stderr
    bad = run_with_timeout([*ZARRFUSE, "convert-tiff", array_v3, tmp_path / "x",
                            "--tile", "10,16"], check=False)
    assert bad.returncode == 1 and "multiples of 16" in bad.stderr


def test_api_converts_with_progress_off(tmp_path):
    source = zarr.create_array(tmp_path / "src", shape=(40, 40), chunks=(40, 40), dtype="f8")
    source[...] = np.linspace(0, 1, 1600).reshape(40, 40)
    converted = convert_to_tiff_array(tmp_path / "src", tmp_path / "dst", tile_shape=(16, 16),
                                      progress=False)
    np.testing.assert_array_equal(converted[...], source[...])


@pytest.mark.fuse
@HEADER_PART
def test_through_the_raw_mount_shards_read_as_tiffs_and_writes_keep_them(tmp_path, header_part):
    array, data = make(tmp_path / "a", "2d-uint16", "zstd", header_part=header_part)
    other, other_data = make(tmp_path / "b", "2d-uint16", "zstd", seed=1, header_part=header_part)
    layout = layout_of(tmp_path / "a")
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        shown = zarr.open_array(mnt, mode="r")
        np.testing.assert_array_equal(shown[...], data)
        np.testing.assert_array_equal(zarrfuse.open_array(mnt)[...], data)
        assert check_shards(mnt, shown, layout, data, mount=True) == 9
        assert list(mnt.rglob("*.header")) == []  # parts are hidden: one file per shard
        # zarr writes shards with tiles from offset 0 through the mount: each gets its header.
        writer = zarr.open_array(mnt, mode="r+")
        data[20:100, 50:150] = 4242
        writer[20:100, 50:150] = 4242
        check_shards(mnt, shown, layout, data, mount=True)
        check_shards(tmp_path / "a", array, layout, data)
        # cp of a whole shard of another dual-access array: stored unchanged (already right).
        other_key = other.metadata.encode_chunk_key((1, 1))
        assembled = tmp_path / "shard"
        assembled.write_bytes(stored_bytes(tmp_path / "b", other_key, layout))
        run_with_timeout(["cp", assembled, mnt / shown.metadata.encode_chunk_key((1, 1))])
        key = array.metadata.encode_chunk_key((1, 1))
        assert (tmp_path / "a" / key).read_bytes() == (tmp_path / "b" / other_key).read_bytes()
        assert stored_bytes(tmp_path / "a", key, layout) == assembled.read_bytes()
        data[layout.region((1, 1))] = other_data[layout.region((1, 1))]
        check_shards(mnt, shown, layout, data, mount=True)
        np.testing.assert_array_equal(zarr.open_array(mnt)[...], data)
        # Bytes that are no shard are refused; the stored shard stays as it was.
        result = run_with_timeout(
            ["cp", tmp_path / "b" / other_key, mnt / shown.metadata.encode_chunk_key((0, 0))],
            check=False,
        )
        assert result.returncode != 0
    check_shards(tmp_path / "a", array, layout, data)


@pytest.mark.fuse
@HEADER_PART
def test_the_raw_mount_of_a_zip_store_shows_the_shards_as_tiffs(tmp_path, header_part):
    """A store that is no local directory (read through zarr's Store API): same TIFFs."""
    _array, data = make(tmp_path / "a", "rgb", "zstd", header_part=header_part)
    zipped = shutil.make_archive(str(tmp_path / "image"), "zip", tmp_path / "a")
    with mounted(zipped, tmp_path / "mnt") as mnt:
        shown = zarr.open_array(mnt, mode="r")
        assert check_shards(mnt, shown, layout_of(tmp_path / "a"), data, mount=True) == 4
        np.testing.assert_array_equal(shown[...], data)


@pytest.mark.fuse
@HEADER_PART
def test_writes_through_a_rendered_view_keep_the_shards_tiffs(tmp_path, header_part):
    """``--format tiff`` renders inner chunks; writing one rewrites its shard through zarr."""
    array, data = make(tmp_path / "a", "2d-uint16", "zstd", header_part=header_part)
    with mounted(tmp_path / "a", tmp_path / "mnt", "--format", "tiff") as mnt:
        chunks = sorted(mnt.rglob("*.tiff"))  # fanout names sort like their coordinates
        assert len(chunks) == 10 * 13
        chunk = chunks[1 * 13 + 2]  # inner chunk (1, 2)
        assert tifffile.imread(chunk).shape == (16, 16)
        tifffile.imwrite(chunk, np.full((16, 16), 77, "uint16"))
    data[16:32, 32:48] = 77
    check_shards(tmp_path / "a", array, layout_of(tmp_path / "a"), data)
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)
