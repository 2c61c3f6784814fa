#!/usr/bin/env python3
"""Rendered views: reading every TIFF of a mount vs decoding + encoding in one process; ls -l.

One run, side by side (issue 5):

1. Read every ``.tiff`` file of a ``--format tiff`` mount (fresh mount: nothing cached) vs, in
   one process, decoding the same chunks with zarr and encoding them with tifffile.
   Floor: zarrfuse >= 0.7x the in-process rate.
2. ``ls -l`` of a directory of 1000 rendered files vs the same directory in the raw view
   (fresh mounts). Floor: rendered <= 2x raw.

    .venv/bin/python bench/bench_render.py [--workdir DIR]
"""

from __future__ import annotations

import argparse
import io
import itertools
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

READ_FLOOR = 0.7
LS_FLOOR = 2.0


def zarrfuse(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True, timeout=120)


def make_image(path: Path) -> zarr.Array:
    """A 2-D uint16 image, 4096 x 4096, zstd chunks of 256 x 256 (256 chunks, 32 MiB)."""
    a = zarr.create_array(path, shape=(4096, 4096), chunks=(256, 256), dtype="uint16",
                          compressors=[ZstdCodec()])
    y, x = np.mgrid[0:4096, 0:4096]
    a[:] = ((x * 7 + y * 13) % 4096 + np.random.default_rng(0).integers(0, 64, (4096, 4096))
            ).astype("uint16")
    return a


def make_wide(path: Path) -> None:
    """1000 chunks in one leaf directory: shape (1, 1000*64), chunks (1, 64)."""
    a = zarr.create_array(path, shape=(1, 64000), chunks=(1, 64), dtype="uint16",
                          compressors=None)
    a[:] = 1


def in_process_rate(array: zarr.Array) -> float:
    total = 0
    start = time.perf_counter()
    for i, j in itertools.product(range(16), range(16)):
        block = array[i * 256 : (i + 1) * 256, j * 256 : (j + 1) * 256]
        out = io.BytesIO()
        tifffile.imwrite(out, block, photometric="minisblack")
        total += len(out.getvalue())
    return total / (time.perf_counter() - start) / 1e6


def mount_rate(source: Path, mnt: Path) -> float:
    zarrfuse("mount", str(source), str(mnt), "--format", "tiff", "--read-only")
    try:
        files = sorted(mnt.rglob("*.tiff"))
        total = 0
        start = time.perf_counter()
        for file in files:
            total += len(file.read_bytes())
        return total / (time.perf_counter() - start) / 1e6
    finally:
        zarrfuse("umount", str(mnt))


def ls_time(source: Path, mnt: Path, *options: str) -> float:
    """``ls -l`` of the row's 1000 files: ``c/0/000/0`` raw; ``planes`` in a TIFF view (the
    row dimension, of extent 1, is left out; files ``x000.tiff``...)."""
    zarrfuse("mount", str(source), str(mnt), "--read-only", *options)
    leaf = "planes" if "tiff" in options else "c/0/000/0"
    try:
        start = time.perf_counter()
        out = subprocess.run(["ls", "-l", str(mnt / leaf)], capture_output=True,
                             text=True, check=True, timeout=120).stdout
        elapsed = time.perf_counter() - start
        assert len(out.splitlines()) == 1001, "expected 1000 entries and a total line"
        return elapsed
    finally:
        zarrfuse("umount", str(mnt))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-bench-render-", dir=args.workdir))
    mnt = work / "mnt"
    mnt.mkdir()
    try:
        image = make_image(work / "image.zarr")
        make_wide(work / "wide.zarr")
        in_process = statistics.median(in_process_rate(image) for _ in range(args.repeat))
        mounted = statistics.median(
            mount_rate(work / "image.zarr", mnt) for _ in range(args.repeat))
        ls_rendered = statistics.median(
            ls_time(work / "wide.zarr", mnt, "--format", "tiff") for _ in range(args.repeat))
        ls_raw = statistics.median(ls_time(work / "wide.zarr", mnt) for _ in range(args.repeat))
        read_ratio, ls_ratio = mounted / in_process, ls_rendered / ls_raw
        print(f"median of {args.repeat} runs; 256 zstd chunks of 256x256 uint16; 1000-file leaf")
        print()
        print("| measure | zarrfuse | baseline | ratio | floor | result |")
        print("|---|---|---|---|---|---|")
        print(f"| read every TIFF (MB/s of TIFF) | {mounted:.0f} | {in_process:.0f} "
              f"(zarr decode + tifffile encode, in process) | {read_ratio:.2f}x | >= "
              f"{READ_FLOOR}x | {'PASS' if read_ratio >= READ_FLOOR else 'MISS'} |")
        print(f"| ls -l of 1000 rendered files (s) | {ls_rendered:.3f} | {ls_raw:.3f} (raw view) "
              f"| {ls_ratio:.2f}x | <= {LS_FLOOR}x "
              f"| {'PASS' if ls_ratio <= LS_FLOOR else 'MISS'} |")
        return 0 if read_ratio >= READ_FLOOR and ls_ratio <= LS_FLOOR else 1
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
