"""Test data written the way other Zarr writers write it, each with the data it must read back.

Every data set is a directory in the shapes a third-party writer leaves on disk: zarr-python 3
with ``zarr_format=2``; ``.zarray`` documents as zarr-python 2 wrote them (chunk bytes from
numcodecs directly, no zarr involved); zarr-python 3 v3 arrays; a concat-parts array written
by zarrfuse; consolidated groups; xarray datasets; an OME-Zarr image from ngff-zarr. A data
set records the arrays in it and their expected values, so every reader is checked against
what was written, not against another reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import xarray as xr
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec

import zarrfuse

SHAPE = (37, 53)  # edge chunks in both dimensions
CHUNKS = (10, 16)


@dataclass
class DataSet:
    """A written store: its root, zarr format, and every array in it with its values."""

    name: str
    zarr_format: int
    root: Path
    arrays: dict[str, np.ndarray]
    concat_parts: frozenset[str] = frozenset()  # arrays only zarrfuse reads from the store
    dataset: xr.Dataset | None = None  # for xarray-written stores
    ome_levels: list[str] = field(default_factory=list)  # multiscale paths, for OME images


def _values(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=SHAPE).astype(dtype)
    return rng.integers(0, 1000, SHAPE).astype(dtype)


def zarr_python_v2(root: Path) -> DataSet:
    """zarr-python 3 writing ``zarr_format=2``: separators, compressors, Delta, order F, fills."""
    group = zarr.open_group(root, mode="w", zarr_format=2)
    arrays = {}
    specs: list[tuple[str, str, str, dict[str, Any]]] = [
        ("blosc_dot", "<i4", ".", {"compressors": numcodecs.Blosc("lz4", 5, 1)}),
        ("zstd_slash", "<u2", "/", {"compressors": numcodecs.Zstd(3)}),
        ("gzip_nan", "<f8", ".", {"compressors": numcodecs.GZip(5), "fill_value": np.nan}),
        ("none_null", "<i2", "/", {"compressors": None, "fill_value": None}),
        ("delta_f", "<i8", "/", {"compressors": numcodecs.Zlib(1),
                                 "filters": [numcodecs.Delta("<i8")], "order": "F"}),
    ]
    for i, (name, dtype, sep, kwargs) in enumerate(specs):
        a = group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype=dtype,
                               chunk_key_encoding={"name": "v2", "separator": sep}, **kwargs)
        data = _values(dtype, i)
        if name == "gzip_nan":
            data[:10, :16] = np.nan  # one chunk all fill value: not stored, NaN on read
        a[:] = data
        arrays[name] = data
    return DataSet("v2-zarr-python", 2, root, arrays)


def _write_v2_by_hand(root: Path, name: str, data: np.ndarray, zarray: dict[str, Any],
                      codec: numcodecs.abc.Codec | None, skip: Callable[[tuple[int, ...]], bool]
                      ) -> None:
    """A ``.zarray`` and its chunks as zarr-python 2 stored them: padded, order, separator."""
    path = root / name
    path.mkdir(parents=True)
    (path / ".zarray").write_text(json.dumps(zarray, indent=4, sort_keys=True))
    (path / ".zattrs").write_text(json.dumps({"written_by": "hand, like zarr-python 2"}))
    chunks = zarray["chunks"]
    grid = [-(-s // c) for s, c in zip(data.shape, chunks, strict=True)]
    for coords in np.ndindex(*grid):
        if skip(coords):
            continue
        block = np.zeros(chunks, dtype=data.dtype)  # edge padding: never read back
        region = tuple(slice(i * c, min((i + 1) * c, s))
                       for i, c, s in zip(coords, chunks, data.shape, strict=True))
        block[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
        raw = block.tobytes(order=zarray["order"])
        payload = codec.encode(raw) if codec is not None else raw
        key = zarray["dimension_separator"].join(map(str, coords))
        (path / key).parent.mkdir(parents=True, exist_ok=True)
        (path / key).write_bytes(bytes(payload))


def hand_written_v2(root: Path) -> DataSet:
    """``.zgroup``/``.zarray`` documents in zarr-python 2's shapes, chunks from numcodecs."""
    root.mkdir(parents=True)
    (root / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (root / ".zattrs").write_text(json.dumps({"title": "hand-written v2"}))
    ints = _values("<i4", 10)
    _write_v2_by_hand(root, "zlib_null", ints, {
        "zarr_format": 2, "shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "<i4",
        "compressor": {"id": "zlib", "level": 1}, "fill_value": None, "order": "C",
        "filters": None, "dimension_separator": ".",
    }, numcodecs.Zlib(1), skip=lambda c: False)
    floats = _values("<f8", 11)
    floats[10:20, 16:32] = np.nan  # chunk (1, 1) missing: the "NaN" fill value shows
    _write_v2_by_hand(root, "blosc_nan_slash_f", floats, {
        "zarr_format": 2, "shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "<f8",
        "compressor": {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2,
                       "blocksize": 0},
        "fill_value": "NaN", "order": "F", "filters": None, "dimension_separator": "/",
    }, numcodecs.Blosc("zstd", 3, 2), skip=lambda c: c == (1, 1))
    deltas = _values("<i8", 12)
    _write_v2_by_hand(root, "delta_zstd", deltas, {
        "zarr_format": 2, "shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "<i8",
        "compressor": {"id": "zstd", "level": 1}, "fill_value": 0, "order": "C",
        "filters": [{"id": "delta", "dtype": "<i8"}], "dimension_separator": ".",
    }, _Pipeline([numcodecs.Delta("<i8"), numcodecs.Zstd(1)]), skip=lambda c: False)
    return DataSet("v2-hand-written", 2, root, {
        "zlib_null": ints, "blosc_nan_slash_f": floats, "delta_zstd": deltas})


class _Pipeline:
    """Filters then compressor, applied the way zarr-python 2 applied them."""

    def __init__(self, codecs: list[numcodecs.abc.Codec]) -> None:
        self.codecs = codecs

    def encode(self, raw: bytes) -> bytes:
        buf: Any = raw
        for codec in self.codecs:
            buf = codec.encode(buf)
        return bytes(buf)


def zarr_python_v3(root: Path) -> DataSet:
    """zarr-python 3 v3 arrays: default encoding with both separators, sharding, a NaN fill."""
    group = zarr.open_group(root, mode="w", zarr_format=3)
    arrays = {}
    specs: list[tuple[str, str, dict[str, Any]]] = [
        ("default_slash", "<u2", {"compressors": [ZstdCodec()],
                                  "chunk_key_encoding": {"name": "default", "separator": "/"}}),
        ("default_dot", "<i4", {"compressors": [BloscCodec()],
                                "chunk_key_encoding": {"name": "default", "separator": "."}}),
        ("gzip_nan", "<f4", {"compressors": [GzipCodec()], "fill_value": np.nan}),
        ("sharded", "<u1", {"shards": (20, 32), "compressors": [ZstdCodec()]}),
    ]
    for i, (name, dtype, kwargs) in enumerate(specs):
        a = group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype=dtype, **kwargs)
        data = _values(dtype, 20 + i)
        if name == "gzip_nan":
            data[10:20, :16] = np.nan
        a[:] = data
        arrays[name] = data
    return DataSet("v3-zarr-python", 3, root, arrays)


def concat_parts_v3(root: Path) -> DataSet:
    """A concat-parts array (zstd frame + crc32c part), default chunk keys: only zarrfuse
    reads it from the store; through a mount the parts are one chunk file."""
    a = zarrfuse.create_array(
        root, shape=SHAPE, chunks=CHUNKS, dtype="<u2",
        compressors=[ZstdCodec(), Crc32cCodec()],
        storage_transformers=[{"name": "concat-parts", "configuration": {"parts": [
            {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}],
    )
    data = _values("<u2", 30)
    a[:] = data
    return DataSet("v3-concat-parts", 3, root, {"": data}, concat_parts=frozenset({""}))


def consolidated(root: Path, zarr_format: int) -> DataSet:
    """A group with nested arrays and ``zarr.consolidate_metadata`` (v2: ``.zmetadata``)."""
    group = zarr.open_group(root, mode="w", zarr_format=zarr_format)
    sub = group.create_group("sub")
    a = group.create_array("x", shape=SHAPE, chunks=CHUNKS, dtype="<f4")
    b = sub.create_array("y", shape=SHAPE, chunks=CHUNKS, dtype="<i2")
    x, y = _values("<f4", 40), _values("<i2", 41)
    a[:] = x
    b[:] = y
    zarr.consolidate_metadata(root, zarr_format=zarr_format)
    return DataSet(f"v{zarr_format}-consolidated", zarr_format, root, {"x": x, "sub/y": y})


def xarray_dataset(root: Path, zarr_format: int) -> DataSet:
    """``Dataset.to_zarr(consolidated=True)``: coordinates, a float variable with NaNs, attrs."""
    rng = np.random.default_rng(50)
    temp = rng.normal(size=(12, 20)).astype("f4")
    temp[0, :5] = np.nan
    ds = xr.Dataset(
        {"temp": (("time", "lat"), temp, {"units": "K"}),
         "count": (("time",), np.arange(12, dtype="i4"))},
        coords={"time": np.arange(12, dtype="i8"), "lat": np.linspace(-90, 90, 20)},
        attrs={"title": "conformance"},
    )
    ds.to_zarr(root, mode="w", zarr_format=zarr_format, consolidated=True,
               encoding={"temp": {"chunks": (5, 8)}})
    arrays = {name: np.asarray(ds[name].values) for name in ("temp", "count", "time", "lat")}
    return DataSet(f"v{zarr_format}-xarray", zarr_format, root, arrays, dataset=ds)


def ome_image(root: Path, version: str) -> DataSet:
    """An OME-Zarr multiscale image from ngff-zarr (0.4: zarr v2; 0.5: zarr v3)."""
    import ngff_zarr  # noqa: PLC0415  (slow to import; only the OME data sets need it)

    data = np.random.default_rng(60).integers(0, 255, (64, 48), dtype="u1")
    image = ngff_zarr.to_ngff_image(data, dims=["y", "x"])
    multiscales = ngff_zarr.to_multiscales(
        image, scale_factors=[2], chunks=16, method=ngff_zarr.Methods.DASK_BIN_SHRINK)
    ngff_zarr.to_ngff_zarr(root, multiscales, version=version)
    levels = [d.path for d in multiscales.metadata.datasets]
    arrays = {path: np.asarray(level.data) for path, level
              in zip(levels, multiscales.images, strict=True)}
    zarr_format = 2 if version == "0.4" else 3
    return DataSet(f"ome-{version}", zarr_format, root, arrays, ome_levels=levels)


WRITERS: dict[str, Callable[[Path], DataSet]] = {
    "v2-zarr-python": zarr_python_v2,
    "v2-hand-written": hand_written_v2,
    "v2-consolidated": lambda root: consolidated(root, 2),
    "v2-xarray": lambda root: xarray_dataset(root, 2),
    "ome-0.4": lambda root: ome_image(root, "0.4"),
    "v3-zarr-python": zarr_python_v3,
    "v3-concat-parts": concat_parts_v3,
    "v3-consolidated": lambda root: consolidated(root, 3),
    "v3-xarray": lambda root: xarray_dataset(root, 3),
    "ome-0.5": lambda root: ome_image(root, "0.5"),
}
"""Every data set by name; each writer takes a directory that does not exist yet."""
