#!/usr/bin/env python3
"""Saving tiles of a sharded array through a rendered view, against zarr-python's own writes.

One run, side by side (issue 30: every write, rendered ones of sharded arrays included, goes
through the mount's commit path). A 4096 x 4096 uint16 zstd image in shards of 2048 x 2048
and chunks of 256 x 256 (64 tiles a shard, about 7 MiB stored per shard):

1. zarrfuse: 16 tiles saved as TIFF files on a writable ``--format tiff`` mount (open, write,
   close: the close commits), four tiles in each shard.
2. zarr-python: the same 16 tiles assigned through ``zarr.open_array(...)[region] = tile`` on
   a copy of the store (zarr's own read-modify-write of the shard).

Prints seconds per saved tile for both and the ratio. No floor: the figure says what a save
costs. Run it with ``PYTHONPATH`` pointing at another checkout for its "before".

    .venv/bin/python bench/bench_rendered_writes.py [--rounds N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

TILE = 256
TILES = [(row, col) for row in (0, 3, 8, 11) for col in (1, 6, 9, 14)]  # 4 in each shard


def zarrfuse(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True, timeout=120)


def make_image(path: Path) -> None:
    a = zarr.create_array(path, shape=(4096, 4096), chunks=(TILE, TILE), shards=(2048, 2048),
                          dtype="uint16", compressors=[ZstdCodec()])
    y, x = np.mgrid[0:4096, 0:4096]
    a[:] = ((x * 7 + y * 13) % 4096 + np.random.default_rng(0).integers(0, 64, (4096, 4096))
            ).astype("uint16")


def tile_value(i: int) -> np.ndarray:
    return np.full((TILE, TILE), 1000 + i, dtype="uint16")


def tiff_of(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value, photometric="minisblack")
    return out.getvalue()


def through_mount(source: Path, mnt: Path) -> float:
    files = [tiff_of(tile_value(i)) for i in range(len(TILES))]
    zarrfuse("mount", str(source), str(mnt), "--format", "tiff")
    try:
        start = time.perf_counter()
        for (row, col), data in zip(TILES, files, strict=True):
            path = mnt / "planes" / f"y{row:03d}" / f"y{row:03d}-x{col:03d}.tiff"
            with open(path, "r+b") as f:
                f.write(data)
                f.truncate(len(data))
        return (time.perf_counter() - start) / len(TILES)
    finally:
        zarrfuse("umount", str(mnt))


def through_zarr(source: Path) -> float:
    array = zarr.open_array(source, mode="r+")
    start = time.perf_counter()
    for i, (row, col) in enumerate(TILES):
        array[row * TILE : (row + 1) * TILE, col * TILE : (col + 1) * TILE] = tile_value(i)
    return (time.perf_counter() - start) / len(TILES)


def check(source: Path) -> None:
    array = zarr.open_array(source)
    for i, (row, col) in enumerate(TILES):
        got = array[row * TILE : (row + 1) * TILE, col * TILE : (col + 1) * TILE]
        if not np.array_equal(got, tile_value(i)):
            raise SystemExit(f"tile {(row, col)} was not stored")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zf-rendered-writes-", dir=args.workdir))
    try:
        image = work / "image.zarr"
        make_image(image)
        mounted, plain = [], []
        for _ in range(args.rounds):  # interleaved: the machine's noise hits both alike
            for name in ("mount", "zarr"):
                copy = work / f"{name}.zarr"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(image, copy)
                if name == "mount":
                    (work / "mnt").mkdir(exist_ok=True)
                    mounted.append(through_mount(copy, work / "mnt"))
                else:
                    plain.append(through_zarr(copy))
                check(copy)
        ours, theirs = statistics.median(mounted), statistics.median(plain)
        print(f"{'save one 256 x 256 tile of a 2048 x 2048 zstd shard':<55} {'s/tile':>8}")
        print(f"{'zarrfuse, --format tiff, open/write/close':<55} {ours:>8.4f}")
        print(f"{'zarr-python, array[region] = tile':<55} {theirs:>8.4f}")
        print(f"{'ratio (zarrfuse / zarr-python)':<55} {ours / theirs:>7.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
