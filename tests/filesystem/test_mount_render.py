"""Rendered views: chunks as TIFF, NPY and PNG files that real readers open on a real mount.
Write-back rules are tested in process: ``tests/filesystem/test_inprocess_semantics.py``."""

from __future__ import annotations

import io
import itertools
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image
from zarr.codecs import ZstdCodec

from tests.mounting import daemon_pid, is_mounted, mounted, read_bytes_of, run_with_timeout
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

FANOUT = FanoutChunkKeyEncoding(1000)
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def random_data(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("complex"):
        return (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    if dtype.startswith("float"):
        return rng.random(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


def chunk_files(array: zarr.Array, mnt: Path, suffix: str):
    """(path, region) for every chunk of the read-chunk grid; the path leaves out the grid
    dimensions of extent 1, as rendered views do (a single chunk: ``c`` + suffix). Pictures
    (TIFF, PNG of a 2-D or RGB array) are named by position (``planes/y001/y001-x002``: the
    arrays here name no dimensions), NPY files by the fanout key."""
    grid = [range(-(-s // c)) for s, c in zip(array.shape, array.chunks, strict=True)]
    shown = [d for d, extent in enumerate(grid) if len(extent) != 1]
    picture = suffix in (".tiff", ".png") and array.ndim >= 2
    for coords in itertools.product(*grid):
        region = tuple(slice(i * c, min((i + 1) * c, s))
                       for i, c, s in zip(coords, array.chunks, array.shape, strict=True))
        if picture and shown:
            names = [f"{'yx'[d]}{coords[d]:03d}" for d in shown]
            yield mnt.joinpath("planes", *names[:-1], "-".join(names) + suffix), region
        else:
            yield mnt / (FANOUT.encode_chunk_key(tuple(coords[d] for d in shown)) + suffix), region


@pytest.fixture(scope="module")
def dtype_group(tmp_path_factory):
    """One group holding an array per dtype, mounted once for the module as read-only TIFF
    files: the tests below only read, so they share the mount."""
    root = tmp_path_factory.mktemp("dtypes")
    group = zarr.open_group(root / "g", mode="w")
    arrays = {}
    for dtype in DTYPES:
        data = random_data((25, 33), dtype)
        a = group.create_array(dtype, shape=data.shape, chunks=(10, 10), dtype=dtype,
                               compressors=[ZstdCodec()])
        a[:] = data
        a[10:20, 10:20] = a.fill_value  # a chunk that is not stored renders as the fill value
        arrays[dtype] = a
    with mounted(root / "g", root / "mnt", "--format", "tiff", "--read-only") as mnt:
        yield mnt, arrays


@pytest.mark.parametrize("dtype", DTYPES)
def test_tiff_of_every_dtype(dtype_group, dtype):
    mnt, arrays = dtype_group
    a = arrays[dtype]
    assert "zarr.json" not in os.listdir(mnt / dtype)
    for file, region in chunk_files(a, mnt / dtype, ".tiff"):
        raw = file.read_bytes()
        assert os.stat(file).st_size == len(raw)
        image = tifffile.imread(io.BytesIO(raw))
        assert image.dtype == np.dtype(dtype) and image.shape == a[region].shape
        np.testing.assert_array_equal(image, a[region])


ND_CASES = {"3d": ((6, 9, 11), (4, 4, 5)), "4d": ((3, 4, 9, 11), (2, 3, 4, 5))}


@pytest.fixture(scope="module", params=["tiff", "npy"])
def nd_group(request, tmp_path_factory):
    """A 3-D and a 4-D array in one group, mounted once per format for the module."""
    root = tmp_path_factory.mktemp(f"nd-{request.param}")
    group = zarr.open_group(root / "g", mode="w")
    arrays = {}
    for name, (shape, chunks) in ND_CASES.items():
        a = group.create_array(name, shape=shape, chunks=chunks, dtype="uint16")
        a[:] = random_data(shape, "uint16")
        arrays[name] = a
    with mounted(root / "g", root / "mnt", "--format", request.param, "--read-only") as mnt:
        yield request.param, mnt, arrays


@pytest.mark.parametrize("case", ND_CASES)
def test_nd_arrays_keep_their_shape(nd_group, case):
    fmt, mounted_at, arrays = nd_group
    a, mnt = arrays[case], mounted_at / case
    data = a[...]
    if fmt == "npy":  # numpy reads any shape: whole chunks
        for file, region in chunk_files(a, mnt, ".npy"):
            np.testing.assert_array_equal(np.load(file), data[region])
        return
    # TIFF: one 2-D image per plane (issue 23 point 5), levels named d0_, d1_..., y
    files = plane_files(a, mnt, ".tiff")
    assert len(files) == np.prod(a.shape[:-2]) * np.prod(a.cdata_shape[-2:])
    assert sorted(str(f) for f, _ in files) == sorted(str(p) for p in mnt.rglob("*.tiff"))
    for file, region in files:
        got = tifffile.imread(file)
        assert got.shape == data[region].shape[-2:]
        np.testing.assert_array_equal(got, data[region].reshape(got.shape))


def plane_files(array: zarr.Array, mnt: Path, suffix: str) -> list[tuple[Path, tuple]]:
    """(path, region) of every 2-D plane file of a planes view of ``array`` (dimensions
    unnamed, every extent under 1000): under ``planes``, a folder per dimension but the
    last (``d{d}_NNN``, the picture's rows ``yNNN``), then a file named by them all joined
    with ``-`` (the columns ``xNNN``); dimensions where the planes' grid has one position
    are left out."""
    planes = (1,) * (array.ndim - 2) + tuple(array.chunks[-2:])
    grid = [-(-s // c) for s, c in zip(array.shape, planes, strict=True)]
    out = []
    for coords in itertools.product(*(range(n) for n in grid)):
        labels = [f"d{d}_" for d in range(array.ndim - 2)] + ["y", "x"]
        names = [f"{labels[d]}{v:03d}" for d, v in enumerate(coords) if grid[d] != 1]
        region = tuple(slice(i * c, min((i + 1) * c, s))
                       for i, c, s in zip(coords, planes, array.shape, strict=True))
        out.append((mnt.joinpath("planes", *names[:-1], "-".join(names) + suffix), region))
    return out


def test_2d_tiff_opens_in_pillow_and_tiffinfo(tmp_path):
    path = tmp_path / "arr"
    data = random_data((130, 70), "uint16")
    a = zarr.create_array(path, shape=data.shape, chunks=(64, 64), dtype="uint16")
    a[:] = data
    with mounted(path, tmp_path / "mnt", "--format", "tiff", "--read-only") as mnt:
        for file, region in chunk_files(a, mnt, ".tiff"):
            # Pillow's TIFF reader keeps a file it opened itself open; give it ours.
            with open(file, "rb") as handle, Image.open(handle) as image:
                np.testing.assert_array_equal(np.asarray(image), data[region])
            info = run_with_timeout(["tiffinfo", str(file)], 30)
            assert "Image Width" in info.stdout
            assert "error" not in (info.stdout + info.stderr).lower()
            shown = run_with_timeout(["identify", "-format", "%w %h %z\n", str(file)], 30)
            height, width = data[region].shape
            assert shown.stdout.split() == [str(width), str(height), "16"]


def test_png_gray_16bit_and_rgb(tmp_path):
    gray_path, rgb_path = tmp_path / "gray", tmp_path / "rgb"
    gray = zarr.create_array(gray_path, shape=(70, 50), chunks=(32, 32), dtype="uint16")
    gray[:] = random_data((70, 50), "uint16")
    rgb = zarr.create_array(rgb_path, shape=(40, 45, 3), chunks=(16, 16, 3), dtype="uint8")
    rgb[:] = random_data((40, 45, 3), "uint8")
    for array, store in [(gray, gray_path), (rgb, rgb_path)]:
        mnt_path = tmp_path / f"mnt-{store.name}"
        with mounted(store, mnt_path, "--format", "png", "--read-only") as mnt:
            for file, region in chunk_files(array, mnt, ".png"):
                assert os.stat(file).st_size == len(file.read_bytes())
                with open(file, "rb") as handle, Image.open(handle) as image:
                    np.testing.assert_array_equal(np.asarray(image), array[region])


def test_png_refuses_arrays_it_cannot_show(tmp_path):
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(10, 10), chunks=(5, 5), dtype="float32")
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout(
        [sys.executable, "-m", "zarrfuse", "mount", str(path), str(tmp_path / "mnt"),
         "--format", "png"], 60, check=False)
    assert result.returncode != 0
    assert not is_mounted(tmp_path / "mnt")
    assert "png" in result.stderr and "float32" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_sharded_array_one_file_per_inner_chunk(tmp_path):
    path = tmp_path / "arr"
    data = random_data((400, 300), "uint8")
    a = zarr.create_array(path, shape=data.shape, chunks=(100, 100), shards=(400, 300),
                          dtype="uint8", compressors=None)
    a[:] = data
    shard_size = (path / "c/0/0").stat().st_size
    with mounted(path, tmp_path / "mnt", "--format", "npy", "--read-only") as mnt:
        assert len(list(mnt.rglob("*.npy"))) == 4 * 3
        pid = daemon_pid(mnt)
        before = read_bytes_of(pid)
        np.testing.assert_array_equal(np.load(mnt / "c/0/002/0/001.npy"), data[200:300, 100:200])
        fetched = read_bytes_of(pid) - before
    assert fetched < shard_size / 2, (fetched, shard_size)  # one tile, not the shard


def test_ls_l_never_decodes(tmp_path):
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(100, 10000), chunks=(100, 100), dtype="uint16",
                          compressors=None)
    a[:] = 5
    chunk_bytes = 100 * 100 * 2
    with mounted(path, tmp_path / "mnt", "--format", "tiff", "--read-only") as mnt:
        pid = daemon_pid(mnt)
        before = read_bytes_of(pid)
        # The grid is (1, 100): the row dimension has extent 1, so the path leaves it out.
        listing = run_with_timeout(["ls", "-l", str(mnt / "planes")], 30).stdout
        # The daemon read only FUSE requests, not one chunk: sizes come from shape and dtype.
        assert read_bytes_of(pid) - before < chunk_bytes
        assert listing.count(".tiff") == 100
