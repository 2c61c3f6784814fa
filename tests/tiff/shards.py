"""Helpers shared by the dual-access tests: the array cases, making arrays, reading shard
files back with real TIFF readers, and checking every shard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import run_with_timeout
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.tiff.arrays import (
    create_tiff_array,
    shard_grid,
)

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
