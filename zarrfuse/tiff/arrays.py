"""Creating, converting to and repairing dual-access arrays: the ``zarr.json`` that declares
them, copying data in shard by shard, rewriting stale headers."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, NamedTuple

import numpy as np
import tifffile
import zarr
from zarr.codecs import BytesCodec
from zarr.errors import ContainsArrayError, ContainsGroupError

from zarrfuse.api.arrays import create_array, open_array, open_store_path, read_node_metadata
from zarrfuse.errors import ConfigurationError, Exists, ZarrFuseError
from zarrfuse.progress import progress_bar
from zarrfuse.tiff.compression import COMPRESSIONS, DEFAULT_COMPRESSION, Compression, compressors
from zarrfuse.tiff.ifd import TILE_MULTIPLE
from zarrfuse.tiff.metadata import ATTRIBUTE, TIFF_SUFFIXES, read_shard_format
from zarrfuse.tiff.shard_format import (
    CLASSIC_LIMIT,
    TiffShardFormat,
    bigtiff_needed,
    check_geometry,
)
from zarrfuse.zarr_compat import default_buffer_prototype, sync

__all__ = [
    "convert_to_tiff_array",
    "create_tiff_array",
    "open_source",
    "repair_tiff_headers",
    "shard_format_of",
    "shard_grid",
]

DEFAULT_TILE = 256
DEFAULT_TILES_PER_SHARD_SIDE = 16


def _round_up(n: int, multiple: int) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def _shapes(
    shape: tuple[int, ...],
    tile: tuple[int, int],
    shard_shape: Sequence[int] | None,
    samples: bool,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Inner chunk (tile) and shard shapes over all axes: 1 along leading axes, whole along
    the samples axis; by default a shard is 16x16 tiles, or the image if smaller."""
    nlead = len(shape) - (3 if samples else 2)
    if nlead < 0:
        raise ConfigurationError(
            f"a dual-access array needs {'3 (Y, X, samples)' if samples else '2'} dimensions "
            f"at least; got shape {list(shape)}"
        )
    if any(t <= 0 or t % TILE_MULTIPLE for t in tile):
        raise ConfigurationError(
            f"tile shape {list(tile)}: TIFF tile sides must be positive multiples of "
            f"{TILE_MULTIPLE}"
        )
    chunks = (1,) * nlead + tuple(tile) + ((shape[-1],) if samples else ())
    if shard_shape is None:
        plane = tuple(
            min(_round_up(n, t), t * DEFAULT_TILES_PER_SHARD_SIDE)
            for n, t in zip(shape[nlead : nlead + 2], tile, strict=True)
        )
        shards = (1,) * nlead + plane + ((shape[-1],) if samples else ())
    else:
        shards = tuple(shard_shape)
        if len(shards) != len(shape):
            raise ConfigurationError(
                f"shard shape {list(shards)} has {len(shards)} dimensions, the array "
                f"{len(shape)}"
            )
        if any(s <= 0 or s % c for s, c in zip(shards, chunks, strict=True)):
            raise ConfigurationError(
                f"shard shape {list(shards)} is not a multiple of the tile shape {list(chunks)}"
            )
    return chunks, shards


def create_tiff_array(
    store: Any,
    *,
    shape: Sequence[int],
    dtype: Any,
    tile_shape: Sequence[int] = (DEFAULT_TILE, DEFAULT_TILE),
    shard_shape: Sequence[int] | None = None,
    compression: Compression = DEFAULT_COMPRESSION,
    samples: bool = False,
    bigtiff: bool | None = None,
    bigtiff_threshold: int = CLASSIC_LIMIT,
    endian: Literal["little", "big"] = "little",
    suffix: str = ".tiff",
    max_children: int = 1000,
    attributes: dict[str, Any] | None = None,
    dimension_names: Sequence[str] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    header_part: bool = False,
) -> zarr.Array:
    """Create an empty dual-access array (docs/dual-access.md). Axes are ``[*leading, Y, X]``,
    or ``[*leading, Y, X, samples]`` with ``samples=True``; ``tile_shape`` is the (Y, X)
    inner chunk; ``shard_shape`` defaults to 1 along leading axes (one page per file).
    ``bigtiff=None`` chooses BigTIFF when a shard could exceed ``bigtiff_threshold`` bytes;
    ``header_part=True`` stores each header in its own ``.header`` part. Write through
    :func:`zarrfuse.open_array` or a zarrfuse mount to keep shards valid TIFFs."""
    shape = tuple(int(n) for n in shape)
    native = np.dtype(dtype)
    if compression not in COMPRESSIONS:
        raise ConfigurationError(
            f"compression must be one of {', '.join(COMPRESSIONS)}; got {compression!r}"
        )
    if not suffix.lower().endswith(TIFF_SUFFIXES):
        raise ConfigurationError(f"suffix {suffix!r} must end in .tif or .tiff")
    if len(tile_shape) != 2:
        raise ConfigurationError(f"tile_shape must be (Y, X), got {tuple(tile_shape)}")
    chunks, shards = _shapes(shape, (int(tile_shape[0]), int(tile_shape[1])), shard_shape, samples)
    byteorder = "<" if endian == "little" or native.itemsize == 1 else ">"
    shard_format = TiffShardFormat(
        shape=shape,
        shard_shape=shards,
        tile_shape=chunks,
        dtype=native.newbyteorder(byteorder),
        byteorder=byteorder,
        compression=compression,
        samples=samples,
        bigtiff=False,
        header_part=header_part,
    )
    check_geometry(shard_format)
    if bigtiff is None:
        bigtiff = bigtiff_needed(shard_format, bigtiff_threshold)
    shard_format = dataclasses.replace(shard_format, bigtiff=bigtiff)
    attributes = {**(attributes or {}), ATTRIBUTE: {"samples": samples, "bigtiff": bigtiff}}
    fanout = {"name": "fanout", "configuration": {"max_children": max_children}}
    try:
        return create_array(  # TIFF-readable tile codecs, .tiff keys, the index in its part
            store,
            shape=shard_format.shape,
            dtype=shard_format.dtype,
            chunks=shard_format.tile_shape,
            shards=shard_format.shard_shape,
            fill_value=0,
            serializer=BytesCodec(endian=endian),
            compressors=compressors(shard_format.compression),
            filters=None,
            chunk_key_encoding={
                "name": "suffix", "configuration": {"suffix": suffix, "base_encoding": fanout}
            },
            storage_transformers=[
                {"name": "concat-parts", "configuration": {"parts": shard_format.parts}}
            ],
            attributes=attributes,
            dimension_names=dimension_names,
            overwrite=overwrite,
            storage_options=storage_options,
        )
    except (ContainsArrayError, ContainsGroupError) as e:
        raise Exists(
            f"{store}: an array or group is already there (--overwrite, overwrite=True, "
            "replaces it)"
        ) from e


def shard_grid(shard_format: TiffShardFormat) -> Iterator[tuple[int, ...]]:
    """Every shard's grid coordinates, in C order."""
    shape, shards = shard_format.shape, shard_format.shard_shape
    counts = [math.ceil(n / s) for n, s in zip(shape, shards, strict=True)]
    return itertools.product(*(range(c) for c in counts))


@contextlib.contextmanager
def open_source(source: Any) -> Iterator[tuple[zarr.Array, bool | None]]:
    """A readable array for ``source`` (a TIFF file or anything zarrfuse opens) and whether
    its last axis holds samples (known for TIFF files, None otherwise)."""
    if not (isinstance(source, str | os.PathLike)
            and os.fspath(source).lower().endswith(TIFF_SUFFIXES) and os.path.isfile(source)):
        yield open_array(source), None
        return
    try:
        tif = tifffile.TiffFile(source)
    except (tifffile.TiffFileError, ValueError) as e:
        raise ConfigurationError(f"{os.fspath(source)}: not a readable TIFF file: {e}") from e
    with tif:
        series = tif.series[0]
        with series.aszarr() as store:
            yield zarr.open_array(store, mode="r"), series.axes.endswith("S")


def convert_to_tiff_array(
    source: Any,
    dest: Any,
    *,
    samples: bool | None = None,
    progress: bool | None = None,
    jobs: int = 4,
    **create: Any,
) -> zarr.Array:
    """Copy ``source`` (a TIFF file, or any array zarrfuse opens) into a new dual-access
    array at ``dest``, ``jobs`` shards at once. ``samples`` defaults to what the TIFF says;
    other keyword arguments go to :func:`create_tiff_array`."""
    with open_source(source) as (src, detected):
        use_samples = samples if samples is not None else bool(detected)
        dest_array = create_tiff_array(
            dest, shape=src.shape, dtype=src.dtype, samples=use_samples, **create
        )
        shard_format = shard_format_of(dest)
        shards = list(shard_grid(shard_format))
        with (
            progress_bar(
                len(shards), unit="shard", description="converting", enabled=progress
            ) as bar,
            ThreadPoolExecutor(jobs) as pool,
        ):

            def copy(coords: tuple[int, ...]) -> None:
                region = shard_format.region(coords)
                dest_array[region] = src[region]
                bar.update()

            for _ in pool.map(copy, shards):  # raises the first failure
                pass
    return dest_array


def shard_format_of(source: Any, storage_options: dict[str, Any] | None = None) -> TiffShardFormat:
    """The shard format of the dual-access array at ``source``; ConfigurationError saying why
    not when it is not one."""
    store_path = sync(open_store_path(source, storage_options=storage_options))
    return read_shard_format(sync(read_node_metadata(store_path)))


class RepairResult(NamedTuple):
    """What ``repair_tiff_headers`` found."""

    checked: int
    stale: int
    """Shards whose header did not match their index (rewritten unless ``check_only``)."""
    unreadable: list[str]
    """``KEY: reason`` for each shard that could not be read or repaired (left as it was)."""


def repair_tiff_headers(
    source: Any, *, check_only: bool = False, progress: bool | None = None
) -> RepairResult:
    """Rewrite the TIFF header of every stored shard whose header does not match its index
    (docs/dual-access.md); with ``check_only`` nothing is written. A shard that cannot be
    read or repaired is reported and left as it was; the others are still checked."""
    shard_format = shard_format_of(source)  # says why when it is not dual-access
    array = open_array(source, mode="r" if check_only else "r+")
    wrapper = array.store_path.store
    prototype = default_buffer_prototype()
    checked = rewritten = 0
    unreadable: list[str] = []
    shards = list(shard_grid(shard_format))
    with progress_bar(len(shards), unit="shard", description="checking", enabled=progress) as bar:
        for coords in shards:
            key = array.store_path.path + "/" if array.store_path.path else ""
            key += array.metadata.encode_chunk_key(coords)
            bar.update()
            try:
                value = sync(wrapper.get(key, prototype))
                if value is None:
                    continue
                old = value.to_bytes()
                if b"".join(shard_format.shard_with_header(coords, [memoryview(old)])) != old:
                    if not check_only:
                        sync(wrapper.set(key, value))  # the store adds the header
                    rewritten += 1
                checked += 1
            except ZarrFuseError as e:
                unreadable.append(f"{key}: {e}")
    return RepairResult(checked, rewritten, unreadable)
