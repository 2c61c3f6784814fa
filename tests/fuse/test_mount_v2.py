"""Real mounts of Zarr v2 data and of consolidated metadata: the mount never shows wrong data.

v2 data is made the way other writers make it: zarr-python 3 with ``zarr_format=2``, and
hand-written ``.zarray`` documents in the shapes zarr-python 2 wrote (``compressor``,
``filters``, ``dimension_separator``, ``fill_value: null`` / ``"NaN"``), with chunk bytes
encoded by numcodecs directly.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, mounted, run_with_timeout

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::UserWarning"),  # numcodecs.* codecs in v3 documents
]


def _v2(path: Path, **kwargs) -> zarr.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.create_array(path, zarr_format=2, **kwargs)


def handwritten_v2(root: Path) -> dict[str, np.ndarray]:
    """A v2 group as zarr-python 2 wrote it: ``.zgroup``, ``.zattrs``, ``.zmetadata`` and
    arrays with a compressor, a filter, ``/`` keys, ``fill_value`` null and ``"NaN"``."""
    root.mkdir()
    (root / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (root / ".zattrs").write_text(json.dumps({"title": "hand made"}))
    arrays: dict[str, np.ndarray] = {}
    # i4, Delta filter + zlib compressor, "/" separator, fill_value null, one chunk missing.
    data = np.arange(6 * 10, dtype="<i4").reshape(6, 10)
    zarray = {"zarr_format": 2, "shape": [6, 10], "chunks": [4, 4], "dtype": "<i4",
              "compressor": {"id": "zlib", "level": 1},
              "filters": [{"id": "delta", "dtype": "<i4"}], "fill_value": None,
              "order": "C", "dimension_separator": "/"}
    expected = np.zeros_like(data)
    (root / "counts").mkdir()
    (root / "counts" / ".zarray").write_text(json.dumps(zarray))
    (root / "counts" / ".zattrs").write_text(json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"]}))
    delta, zlib = numcodecs.Delta(dtype="<i4"), numcodecs.Zlib(level=1)
    for i in range(2):
        for j in range(3):
            if (i, j) == (1, 2):
                continue  # never written: reads as zarr-python's default for null, 0
            block = np.zeros((4, 4), "<i4")
            part = data[i * 4 : i * 4 + 4, j * 4 : j * 4 + 4]
            block[: part.shape[0], : part.shape[1]] = part
            expected[i * 4 : i * 4 + 4, j * 4 : j * 4 + 4] = part
            (root / "counts" / str(i)).mkdir(exist_ok=True)
            (root / "counts" / str(i) / str(j)).write_bytes(zlib.encode(delta.encode(block)))
    arrays["counts"] = expected
    # f8, no compressor, "." keys, fill_value "NaN", Fortran order.
    temps = np.linspace(0, 1, 12).reshape(3, 4)
    zarray = {"zarr_format": 2, "shape": [3, 4], "chunks": [2, 4], "dtype": "<f8",
              "compressor": None, "filters": None, "fill_value": "NaN", "order": "F"}
    (root / "temps").mkdir()
    (root / "temps" / ".zarray").write_text(json.dumps(zarray))
    (root / "temps" / "0.0").write_bytes(np.asfortranarray(temps[:2]).tobytes(order="F"))
    expected_temps = temps.copy()
    expected_temps[2:] = np.nan  # chunk (1, 0) not stored: the fill value
    arrays["temps"] = expected_temps
    metadata = {".zgroup": {"zarr_format": 2}, ".zattrs": {"title": "hand made"}}
    for name in ("counts", "temps"):
        for doc in (".zarray", ".zattrs"):
            if (root / name / doc).exists():
                metadata[f"{name}/{doc}"] = json.loads((root / name / doc).read_text())
    (root / ".zmetadata").write_text(json.dumps({"zarr_consolidated_format": 1,
                                                 "metadata": metadata}))
    return arrays


def zarr_written_v2(root: Path) -> dict[str, np.ndarray]:
    """A v2 group written by zarr-python 3: blosc, ``.`` keys, a sharded-looking 3-D array
    with ``/`` keys, consolidated with ``zarr.consolidate_metadata``."""
    zarr.open_group(root, mode="w", zarr_format=2)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 255, (30, 40), dtype="u1")
    _v2(root / "image", shape=a.shape, chunks=(16, 16), dtype="u1",
        compressors=numcodecs.Blosc(cname="zstd"))[:] = a
    b = rng.random((4, 9, 9)).astype("f4")
    _v2(root / "volume", shape=b.shape, chunks=(2, 5, 5), dtype="f4",
        chunk_key_encoding={"name": "v2", "separator": "/"},
        compressors=numcodecs.GZip(level=3), fill_value=None)[:] = b
    zarr.consolidate_metadata(root)
    return {"image": a, "volume": b}


@pytest.mark.parametrize("layout", ["fanout", "source"])
@pytest.mark.parametrize("writer", [handwritten_v2, zarr_written_v2])
def test_v2_groups_read_identical_through_either_layout(tmp_path, layout, writer):
    expected = writer(tmp_path / "v2.zarr")
    with mounted(tmp_path / "v2.zarr", tmp_path / "mnt", "--read-only", "--layout", layout) as mnt:
        names = sorted(os.listdir(mnt))
        if layout == "fanout":  # shown as v3: one zarr.json per node, chunks in fanout trees
            assert "zarr.json" in names and ".zgroup" not in names
            assert zarr.open_group(mnt).metadata.zarr_format == 3
        else:  # documents as stored
            assert {".zgroup", ".zmetadata"} <= set(names) and "zarr.json" not in names
            for name in expected:
                assert (mnt / name / ".zarray").read_bytes() == (
                    tmp_path / "v2.zarr" / name / ".zarray").read_bytes()
        for consolidated in (True, False):
            group = zarr.open_group(mnt, mode="r", use_consolidated=consolidated)
            for name, values in expected.items():
                np.testing.assert_array_equal(group[name][:], values)


def test_v2_array_mounted_on_its_own_shows_a_fanout_tree_of_its_chunks(tmp_path):
    data = np.arange(100, dtype="i2").reshape(10, 10)
    _v2(tmp_path / "a.zarr", shape=(10, 10), chunks=(5, 5), dtype="i2",
        compressors=None)[:] = data
    with mounted(tmp_path / "a.zarr", tmp_path / "mnt", "--read-only", "--suffix", ".raw") as mnt:
        files = sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*") if p.is_file())
        assert files == ["c/0/000/0/000.raw", "c/0/000/0/001.raw", "c/0/001/0/000.raw",
                         "c/0/001/0/001.raw", "zarr.json"]
        assert (mnt / "c/0/001/0/000.raw").read_bytes() == (tmp_path / "a.zarr/1.0").read_bytes()
        document = json.loads((mnt / "zarr.json").read_text())
        assert document["chunk_key_encoding"]["name"] == "suffix"
        np.testing.assert_array_equal(zarr.open_array(mnt)[:], data)


def test_writes_through_the_mount_keep_a_v2_array_readable(tmp_path):
    data = np.zeros((8, 8), "u2")
    _v2(tmp_path / "a.zarr", shape=(8, 8), chunks=(4, 4), dtype="u2",
        compressors=numcodecs.Zstd())[:] = data
    update = np.arange(64, dtype="u2").reshape(8, 8)
    with mounted(tmp_path / "a.zarr", tmp_path / "mnt") as mnt:
        zarr.open_array(mnt, mode="r+")[:] = update  # zarr writes v3-shown chunk files
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "a.zarr")[:], update)
    assert json.loads((tmp_path / "a.zarr/.zarray").read_text())["zarr_format"] == 2
    with mounted(tmp_path / "a.zarr", tmp_path / "mnt", "--layout", "source") as mnt:
        zarr.open_array(mnt, mode="r+", zarr_format=2)[4:, 4:] = 7
    update[4:, 4:] = 7
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "a.zarr")[:], update)


def test_verify_info_and_convert_tiff_take_v2_sources(tmp_path):
    data = np.random.default_rng(1).integers(0, 60000, (40, 40), dtype="u2")
    _v2(tmp_path / "a.zarr", shape=data.shape, chunks=(16, 16), dtype="u2")[:] = data
    verify = run_with_timeout([*ZARRFUSE, "verify", tmp_path / "a.zarr"], 60, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    info = run_with_timeout([*ZARRFUSE, "info", tmp_path / "a.zarr"], 60)
    assert "40" in info.stdout
    run_with_timeout([*ZARRFUSE, "convert-tiff", tmp_path / "a.zarr", tmp_path / "t.zarr",
                      "--tile", "16,16"], 120)
    import zarrfuse  # noqa: PLC0415  (the no-mount API, after the CLI ran)

    np.testing.assert_array_equal(zarrfuse.open_array(tmp_path / "t.zarr")[:], data)
    (tmp_path / "a.zarr/0.0").write_bytes(b"not blosc")
    broken = run_with_timeout([*ZARRFUSE, "verify", tmp_path / "a.zarr"], 60, check=False)
    assert broken.returncode == 1 and "0.0" in broken.stdout + broken.stderr


def test_malformed_v2_document_is_refused_with_its_name(tmp_path):
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr/.zarray").write_text("{not json")
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout(
        [*ZARRFUSE, "mount", tmp_path / "bad.zarr", tmp_path / "mnt"], 30, check=False)
    assert result.returncode != 0
    assert ".zarray is not valid JSON" in result.stderr


def test_rendered_view_of_a_v2_array_decodes_its_chunks(tmp_path):
    data = np.arange(12 * 10, dtype="<u2").reshape(12, 10)
    _v2(tmp_path / "a.zarr", shape=data.shape, chunks=(6, 5), dtype="<u2",
        compressors=numcodecs.Zlib(), order="F")[:] = data
    with mounted(tmp_path / "a.zarr", tmp_path / "mnt", "--read-only", "--format", "npy") as mnt:
        assert not (mnt / "zarr.json").exists() and not (mnt / ".zarray").exists()
        np.testing.assert_array_equal(np.load(mnt / "c/0/001/0/001.npy"), data[6:, 5:])


def test_v2_strings_are_shown_with_the_v3_vlen_codec(tmp_path):
    values = np.array(["a", "bb", "", "dddd", "e"], dtype=object)
    _v2(tmp_path / "s.zarr", shape=(5,), chunks=(2,), dtype=str)[:] = values
    assert json.loads((tmp_path / "s.zarr/.zarray").read_text())["filters"] == [
        {"id": "vlen-utf8"}]
    with mounted(tmp_path / "s.zarr", tmp_path / "mnt", "--read-only") as mnt:
        codecs = json.loads((mnt / "zarr.json").read_text())["codecs"]
        assert codecs[0]["name"] == "vlen-utf8"
        assert list(zarr.open_array(mnt)[:]) == list(values)
