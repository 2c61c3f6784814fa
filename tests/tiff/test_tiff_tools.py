"""Dual-access arrays through the tools: ``zarrfuse info`` says whether and why not,
``convert-tiff`` from an array and a TIFF file, and the raw and rendered mounts, on which the
shards read as TIFFs and writes keep them so."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import tifffile
import zarr

import zarrfuse
from tests.mounting import ZARRFUSE, mounted, run_with_timeout
from tests.tiff.shards import (
    HEADER_PART,
    check_shards,
    make,
    sample,
    stored_bytes,
)
from zarrfuse.tiff.arrays import (
    convert_to_tiff_array,
    shard_format_of,
)

pytestmark = pytest.mark.timeout(120)


def test_info_says_whether_and_why_not(tmp_path, array_v3):
    make(tmp_path / "tiff", "rgb", "zstd")
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "tiff"])
    assert "dual-access (shards are TIFF files): yes: classic TIFF" in result.stdout
    assert "3 samples per pixel" in result.stdout and "zstd" in result.stdout
    assert "header in the shard file: shard files are TIFFs on disk too" in result.stdout
    make(tmp_path / "deflate", "2d-uint8", "deflate")
    result = run_with_timeout([*ZARRFUSE, "info", tmp_path / "deflate"])
    assert "deflate (TIFF compression 8)" in result.stdout
    assert "ZarrUserWarning" not in result.stderr  # the command knows numcodecs.zlib
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
    assert "dual-access" not in result.stdout  # an ordinary array: nothing to say about it
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
    assert out.count("dual-access (shards are TIFF files):") == 1  # the image's; plain: none
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
    check_shards(tmp_path / "dst", converted, shard_format_of(tmp_path / "dst"), data)
    rgb = sample((60, 90, 3), "uint8", seed=4)
    tifffile.imwrite(tmp_path / "photo.tif", rgb, photometric="rgb")
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "photo.tif", tmp_path / "photo",
                      "--tile", "32,32"])
    photo = zarrfuse.open_array(tmp_path / "photo")
    layout = shard_format_of(tmp_path / "photo")
    assert layout.samples and layout.compression == "deflate"  # the default
    check_shards(tmp_path / "photo", photo, layout, rgb)
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "photo.tif", tmp_path / "parts",
                      "--tile", "32,32", "--shard-shape", "32,64,3", "--header-part"])
    parts = zarrfuse.open_array(tmp_path / "parts")
    layout = shard_format_of(tmp_path / "parts")
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
    assert shard_format_of(tmp_path / "dst").compression == "deflate"  # the API's default too


@pytest.mark.fuse
@HEADER_PART
def test_through_the_raw_mount_shards_read_as_tiffs_and_writes_keep_them(tmp_path, header_part):
    array, data = make(tmp_path / "a", "2d-uint16", "zstd", header_part=header_part)
    other, other_data = make(tmp_path / "b", "2d-uint16", "zstd", seed=1, header_part=header_part)
    layout = shard_format_of(tmp_path / "a")
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
        assert check_shards(mnt, shown, shard_format_of(tmp_path / "a"), data, mount=True) == 4
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
    check_shards(tmp_path / "a", array, shard_format_of(tmp_path / "a"), data)
    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "a")[...], data)
