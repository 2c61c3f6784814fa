#!/usr/bin/env python3
"""Dual-access arrays (shards that are TIFF files): reading and converting, against zarr.

One run, side by side (issue 6):

1. Read every shard file of a dual-access array from disk with ``tifffile.imread`` vs reading
   the same region with zarr (``zarrfuse.open_array(...)[...]``, the same bytes). Both
   throughputs are printed (MB/s of decoded pixels); no floor: the figure says what a TIFF
   reader costs next to zarr.
2. Converting a plain zarr array into a dual-access array (``convert_to_tiff_array``) vs a
   plain zarr copy of it with the same shards and codecs (``zarr.from_array``; both zstd,
   not convert-tiff's default deflate, so the figure is the cost of the layout alone).
   Floor: conversion >= 0.5x the plain copy.

    .venv/bin/python bench/bench_tiff_shards.py [--repeat N] [--workdir DIR]

Median of ``--repeat`` runs; exit status 1 if a floor is missed. Prints the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

import zarrfuse
from zarrfuse.tiff.arrays import convert_to_tiff_array, layout_of, shard_grid

CONVERT_FLOOR = 0.5
SHAPE = (8192, 4096)  # uint16: 64 MiB of pixels
TILE = (256, 256)
SHARD = (1024, 1024)  # 32 shards of 2 MiB (decoded), 16 tiles each


def make_source(path: Path) -> zarr.Array:
    """A plain zarr image: zstd chunks of 256x256, gradients plus noise (compressible)."""
    a = zarr.create_array(path, shape=SHAPE, chunks=TILE, dtype="uint16",
                          compressors=[ZstdCodec()])
    y, x = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]]
    noise = np.random.default_rng(0).integers(0, 64, SHAPE)
    a[:] = ((x * 7 + y * 13) % 4096 + noise).astype("uint16")
    return a


def median_seconds(run: Callable[[], object], repeat: int, before: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_tiff_shards_", dir=args.workdir))
    try:
        source = make_source(work / "src")
        nbytes = source.nbytes
        dual = work / "dual"
        plain = work / "plain"

        def clear() -> None:
            for path in (dual, plain):
                shutil.rmtree(path, ignore_errors=True)
            os.sync()

        convert = median_seconds(
            lambda: convert_to_tiff_array(work / "src", dual, tile_shape=TILE,
                                          shard_shape=SHARD, compression="zstd",
                                          progress=False),
            args.repeat, clear,
        )
        copy = median_seconds(
            lambda: zarr.from_array(plain, data=source, chunks=TILE, shards=SHARD,
                                    compressors=[ZstdCodec()]),
            args.repeat, clear,
        )
        convert_to_tiff_array(work / "src", dual, tile_shape=TILE, shard_shape=SHARD,
                              compression="zstd", progress=False)
        array = zarrfuse.open_array(dual)
        layout = layout_of(dual)
        files = [dual / array.metadata.encode_chunk_key(c) for c in shard_grid(layout)]
        expected = source[...]

        def read_tiffs() -> None:
            for coords, path in zip(shard_grid(layout), files, strict=True):
                image = tifffile.imread(path)
                assert image.shape == expected[layout.region(coords)].shape

        tiff_read = median_seconds(read_tiffs, args.repeat, lambda: None)
        zarr_read = median_seconds(lambda: array[...], args.repeat, lambda: None)
        for coords, path in zip(shard_grid(layout), files, strict=True):  # untimed check
            np.testing.assert_array_equal(tifffile.imread(path), expected[layout.region(coords)])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = nbytes / 1e6
    rates = {
        "read": (mb / tiff_read, mb / zarr_read),
        "convert": (mb / convert, mb / copy),
    }
    convert_ratio = rates["convert"][0] / rates["convert"][1]
    passed = convert_ratio >= CONVERT_FLOOR
    load = os.getloadavg()
    print(f"median of {args.repeat} runs; {SHAPE[0]}x{SHAPE[1]} uint16 ({mb:.0f} MB), zstd "
          f"tiles {TILE[0]}x{TILE[1]}, {len(files)} shards of {SHARD[0]}x{SHARD[1]}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print()
    print("| measure | zarrfuse | baseline | ratio | floor | result |")
    print("|---|---|---|---|---|---|")
    tiff_rate, zarr_rate = rates["read"]
    print(f"| read every shard as TIFF with tifffile, MB/s | {tiff_rate:.0f} | {zarr_rate:.0f} "
          f"(zarr, same region) | {tiff_rate / zarr_rate:.2f}x | none | info |")
    ours, theirs = rates["convert"]
    print(f"| convert to dual-access, MB/s | {ours:.0f} | {theirs:.0f} (zarr.from_array, same "
          f"shards) | {convert_ratio:.2f}x | >= {CONVERT_FLOOR}x | "
          f"{'PASS' if passed else 'MISS'} |")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
