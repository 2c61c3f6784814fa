#!/usr/bin/env python3
"""Issue 54's benchmark: the colour composite of a 100,000 x 100,000 3-channel image.

The image: an OME-Zarr 0.5 group, 3 channels of uint16, zstd chunks of 1 x 256 x 256, with
``omero`` colours and windows and a pyramid down to 391 x 391 (9 levels); the first row of
chunks of every level is stored (smooth data with noise), the rest is the fill value.

1. Time to the first composite tile: on a fresh mount, the header of
   ``cells.composite.tif`` read (by tifffile, not timed), then one ``pread`` of its first
   tile (3 chunks decoded, composed). Floor: < 100 ms. Beside it, the same read of the
   OME-TIFF's first tile (1 chunk decoded).
2. Composite MB/s: 32 MiB of tile bytes from the first tile on, 1 MiB reads in file order
   (the stored row of chunks), on the mount, beside the same read of the OME-TIFF on the
   same mount. Floor: >= 0.5x the OME-TIFF's (the composite's 3 bytes a pixel need 6 bytes
   of channels decoded, so equal decoding speed gives 0.5x).

Each figure is the best of ``--repeat`` runs, each on a new mount.

    .venv/bin/python bench/bench_composite.py [--workdir DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

SIDE, CHUNK, CHANNELS = 100_000, 256, 3
FIRST_TILE_FLOOR_S = 0.100
RATE_FLOOR = 0.5
READ, SPAN = 1 << 20, 32 << 20


def zarrfuse(*args: str, timeout: float = 120) -> None:
    subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True, timeout=timeout,
                   capture_output=True, text=True)


@contextmanager
def mounted(source: Path, mnt: Path) -> Iterator[Path]:
    mnt.mkdir(parents=True, exist_ok=True)
    zarrfuse("mount", str(source), str(mnt), "--format", "ome-tiff")
    try:
        yield mnt
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], timeout=60, check=False)


def make_image(root: Path) -> None:
    group = zarr.open_group(root, mode="w", zarr_format=3)
    rng = np.random.default_rng(1)
    datasets, side, level = [], SIDE, 0
    while True:
        array = zarr.create_array(root / str(level), shape=(CHANNELS, side, side),
                                  chunks=(1, CHUNK, CHUNK), dtype="u2", fill_value=0,
                                  compressors=ZstdCodec(level=3))
        rows = min(CHUNK, side)
        x = np.arange(side, dtype=np.float64)
        band = np.stack([(np.sin(x / (40 + 30 * c))[None, :] * 8000 + 10000
                          + rng.integers(0, 2000, (rows, side))) for c in range(CHANNELS)])
        array[:, :rows, :] = band.astype("u2")
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 2.0**level, 2.0**level]}]})
        if side <= 512:
            break
        side, level = -(-side // 2), level + 1
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
            {"name": "x", "type": "space"}]
    channels = [{"label": n, "color": c, "active": True,
                 "window": {"min": 0, "max": 65535, "start": 2000, "end": 20000}}
                for n, c in (("DAPI", "0000FF"), ("GFP", "00FF00"), ("mCherry", "FF00FF"))]
    group.attrs.update({"ome": {"version": "0.5", "multiscales": [
        {"axes": axes, "datasets": datasets}], "omero": {"channels": channels}}})


def first_tile(path: Path) -> tuple[int, int]:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        return int(page.dataoffsets[0]), int(page.databytecounts[0])


def first_tile_time(source: Path, mnt: Path, name: str) -> float:
    with mounted(source, mnt) as m:
        offset, nbytes = first_tile(m / name)
        fd = os.open(m / name, os.O_RDONLY)
        try:
            start = time.perf_counter()
            assert len(os.pread(fd, nbytes, offset)) == nbytes
            return time.perf_counter() - start
        finally:
            os.close(fd)


def rates(source: Path, mnt: Path) -> dict[str, float]:
    """MB/s of each file's first SPAN tile bytes, both on one mount (composite first)."""
    out = {}
    with mounted(source, mnt) as m:
        for name in ("cells.composite.tif", "cells.ome.tif"):
            offset, _ = first_tile(m / name)
            fd = os.open(m / name, os.O_RDONLY)
            try:
                start = time.perf_counter()
                for at in range(offset, offset + SPAN, READ):
                    assert len(os.pread(fd, READ, at)) == READ
                out[name] = SPAN / 1e6 / (time.perf_counter() - start)
            finally:
                os.close(fd)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-composite-"))
    try:
        source = work / "cells.ome.zarr"
        if not source.exists():
            make_image(source)
        mnt = work / "mnt"
        composite_s = min(first_tile_time(source, mnt, "cells.composite.tif")
                          for _ in range(args.repeat))
        ome_s = min(first_tile_time(source, mnt, "cells.ome.tif") for _ in range(args.repeat))
        runs = [rates(source, mnt) for _ in range(args.repeat)]
        composite_rate = max(r["cells.composite.tif"] for r in runs)
        ome_rate = max(r["cells.ome.tif"] for r in runs)
        result = {
            "first_composite_tile_ms": round(composite_s * 1e3, 1),
            "first_ome_tiff_tile_ms": round(ome_s * 1e3, 1),
            "first_tile_floor_ms": FIRST_TILE_FLOOR_S * 1e3,
            "composite_mb_s": round(composite_rate, 1),
            "ome_tiff_mb_s": round(ome_rate, 1),
            "rate_ratio": round(composite_rate / ome_rate, 2),
            "rate_floor": RATE_FLOOR,
        }
        print(json.dumps(result, indent=2))
        ok = composite_s < FIRST_TILE_FLOOR_S and composite_rate >= RATE_FLOOR * ome_rate
        return 0 if ok else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
