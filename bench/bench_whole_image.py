#!/usr/bin/env python3
"""Issue 14's figures in one run: whole images and rendered chunk files at the codec's pace.

1. Read every tile of the ``--format ome-tiff`` file of a 4096 x 4096 uint16 image of zstd
   256 x 256 chunks (in file order, one ``pread`` per tile, as a viewer reads), on a fresh
   mount. Floor: >= 0.5x the baseline.
2. Read every file of the ``--format tiff`` view of the same image (walk, open, read), on a
   fresh mount. Floor: >= 0.5x the baseline.
   Baseline of both: numcodecs decoding the same chunk bytes in this process, one thread.
3. Read the header of a 100,000 x 100,000 uint16 image (256 x 256 chunks, ~150,000 tiles)
   with tifffile on a fresh mount: open, first page, its tile offsets, the series shape.
   Floor: < 1 s. Shown beside the same read of a local file with the same header.

Rates are MB/s of decoded image bytes; each figure is the best of ``--repeat`` runs, every
run on a new mount (nothing cached in the daemon or the kernel).

    .venv/bin/python bench/bench_whole_image.py [--workdir DIR] [--repeat N]
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numcodecs
import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

TILE_FLOOR = 0.5
FILES_FLOOR = 0.5
HEADER_FLOOR_S = 1.0
SIDE, CHUNK = 4096, 256


def zarrfuse(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True,
                          timeout=timeout, capture_output=True, text=True)


@contextmanager
def mounted(source: Path, mnt: Path, *options: str) -> Iterator[Path]:
    mnt.mkdir(parents=True, exist_ok=True)
    zarrfuse("mount", str(source), str(mnt), *options)
    try:
        yield mnt
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], timeout=60, check=False)


def make_image(path: Path) -> zarr.Array:
    """4096 x 4096 uint16, zstd 256 x 256 chunks: a gradient with noise, as a camera's."""
    a = zarr.create_array(path, shape=(SIDE, SIDE), chunks=(CHUNK, CHUNK), dtype="uint16",
                          compressors=[ZstdCodec(level=3)])
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    noise = np.random.default_rng(0).integers(0, 64, (SIDE, SIDE))
    a[:] = ((x * 7 + y * 13) % 4096 + noise).astype("uint16")
    return a


def baseline_rate(path: Path) -> float:
    """numcodecs decoding every chunk's bytes, one thread (the bytes read beforehand)."""
    chunks = [p.read_bytes() for p in sorted((path / "c").rglob("*")) if p.is_file()]
    codec = numcodecs.Zstd()
    start = time.perf_counter()
    total = sum(len(codec.decode(raw)) for raw in chunks)
    return total / (time.perf_counter() - start) / 1e6


def whole_image_rate(source: Path, mnt: Path, *, block: int | None = None) -> float:
    """Every tile read, in file order: one ``pread`` per tile, or (``block``) the tile data
    read through in blocks of that many bytes, as ``cp`` or a converter reads it."""
    with mounted(source, mnt, "--format", "ome-tiff"):
        path = mnt / "image.ome.tif"
        with tifffile.TiffFile(path) as tif:  # the header: offsets of every tile
            offsets = tif.pages[0].dataoffsets
            counts = tif.pages[0].databytecounts
        order = np.argsort(offsets)
        fd = os.open(path, os.O_RDONLY)
        try:
            start = time.perf_counter()
            if block is None:
                total = sum(len(os.pread(fd, int(counts[i]), int(offsets[i]))) for i in order)
            else:
                at, end, total = int(offsets[order[0]]), path.stat().st_size, 0
                while at < end:
                    got = len(os.pread(fd, min(block, end - at), at))
                    total, at = total + got, at + got
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
    assert total == SIDE * SIDE * 2, total
    return total / elapsed / 1e6


def chunk_files_rate(source: Path, mnt: Path, fmt: str = "tiff") -> float:
    """Every chunk file of a ``--format FMT`` view read, in directory order (MB/s of decoded
    image bytes). The walk that finds them is not timed (listing has figures of its own);
    it decodes nothing."""
    with mounted(source, mnt, "--format", fmt):
        files = sorted(p for p in mnt.rglob("*") if p.is_file() and p.name != "zarr.json")
        start = time.perf_counter()
        total = 0
        for path in files:
            with open(path, "rb") as f:
                total += len(f.read())
        elapsed = time.perf_counter() - start
    assert len(files) == (SIDE // CHUNK) ** 2, len(files)
    return SIDE * SIDE * 2 / elapsed / 1e6


def read_header(path: Path) -> float:
    start = time.perf_counter()
    with tifffile.TiffFile(path) as tif:
        offsets = tif.pages[0].dataoffsets
        shape = tif.series[0].shape
    elapsed = time.perf_counter() - start
    assert shape == (100_000, 100_000) and len(offsets) == 391 * 391
    return elapsed


def header_times(source: Path, mnt: Path, local: Path) -> tuple[float, float]:
    with mounted(source, mnt, "--format", "ome-tiff"):
        path = mnt / "slide.ome.tif"
        on_mount = read_header(path)
        if not local.exists():  # the same header in a sparse local file
            with open(path, "rb") as f:
                header = f.read(2 << 20)
            with open(local, "wb") as out:
                out.write(header)
                out.truncate(path.stat().st_size)
        stats = json.loads(zarrfuse("stats", "--json", str(mnt)).stdout)
        decoded = stats["counters"].get("decoded", {}).get("chunks", 0)
        assert decoded == 0, f"the header read decoded {decoded} chunks"
    return on_mount, read_header(local)


def best(repeat: int, run: Callable[[], float], *, lowest: bool = False) -> float:
    values = [run() for _ in range(repeat)]
    return min(values) if lowest else max(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-whole-image-"))
    try:
        image = work / "image.zarr"
        make_image(image)
        slide = work / "slide"
        big = zarr.create_array(slide, shape=(100_000, 100_000), chunks=(CHUNK, CHUNK),
                                dtype="uint16", fill_value=0)
        big[:CHUNK, : 2 * CHUNK] = 5
        mnt = work / "mnt"
        base = best(args.repeat, lambda: baseline_rate(image))
        tiles = best(args.repeat, lambda: whole_image_rate(image, mnt))
        blocks = best(args.repeat, lambda: whole_image_rate(image, mnt, block=1 << 20))
        files = best(args.repeat, lambda: chunk_files_rate(image, mnt))
        raw = best(args.repeat, lambda: chunk_files_rate(image, mnt, "raw"))
        headers = [header_times(slide, mnt, work / "slide-header.tif")
                   for _ in range(args.repeat)]
        header, local = min(h for h, _ in headers), min(loc for _, loc in headers)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    print(f"{'figure':52} {'zarrfuse':>12} {'baseline':>12} {'ratio':>7}  floor")
    print(f"{'whole-image tiles (ome-tiff, pread per tile)':52} {tiles:9.0f} MB/s "
          f"{base:7.0f} MB/s {tiles / base:6.2f}x  >= {TILE_FLOOR}x "
          f"{verdict(tiles / base >= TILE_FLOOR)}")
    print(f"{'whole-image tile data (1 MiB reads, as cp reads)':52} {blocks:9.0f} MB/s "
          f"{base:7.0f} MB/s {blocks / base:6.2f}x  (same floor) "
          f"{verdict(blocks / base >= TILE_FLOOR)}")
    print(f"{'rendered chunk files (--format tiff)':52} {files:9.0f} MB/s "
          f"{base:7.0f} MB/s {files / base:6.2f}x  >= {FILES_FLOOR}x "
          f"{verdict(files / base >= FILES_FLOOR)}")
    print(f"{'  for scale: raw chunk files (no decoding at all)':52} {raw:9.0f} MB/s "
          f"{base:7.0f} MB/s {raw / base:6.2f}x  (the mount's per-file ceiling)")
    print(f"{'header of a 100k x 100k image (tifffile)':52} {header:10.3f} s "
          f"{local:10.3f} s {header / local:6.1f}x  < {HEADER_FLOOR_S} s "
          f"{verdict(header < HEADER_FLOOR_S)}")
    print("baseline: numcodecs zstd decode of the same chunk bytes, in process, one thread; "
          "header baseline: the same header in a local file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
