#!/usr/bin/env python3
"""Following a local store (issue 31, point 5): how soon a change shows, and what it costs.

One run, side by side, each measure on fresh stores and mounts, ``--repeat`` rounds in
rotating order, medians:

- **delay**: zarr-python rewrites one chunk of a 4096 x 4096 uint16 image while a
  read-only ``--format ome-tiff`` mount of it is open and its whole image was read; the
  seconds until a read of the whole image shows the new pixels (polled every 20 ms). The
  baseline is what a user had to do before: unmount and mount again, then read.
- **writes**: ``cp`` of N chunk files of 1 MiB into a writable mount, which hears of its
  own writes too, against the same into a ``--no-watch`` mount: the watch's cost to the
  mount's own writes (ratio).

    .venv/bin/python bench/bench_store_watch.py [--repeat 3] [--files 128]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile
import zarr

ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
SIDE, CHUNK = 4096, 512


def zarrfuse(*args: str) -> None:
    subprocess.run([*ZARRFUSE, *args], check=True, timeout=120, capture_output=True)


def whole(path: Path) -> np.ndarray:
    with tifffile.TiffFile(path) as tif:
        return tif.series[0].asarray()


def make_image(path: Path) -> None:
    data = np.random.default_rng(1).integers(0, 65535, (SIDE, SIDE), dtype="u2")
    zarr.create_array(path, data=data, chunks=(CHUNK, CHUNK))


def delay_watched(work: Path) -> float:
    store, mnt = work / "img", work / "mnt"
    make_image(store)
    mnt.mkdir()
    zarrfuse("mount", str(store), str(mnt), "--format", "ome-tiff")
    try:
        image = mnt / "img.ome.tif"
        whole(image)
        zarr.open_array(store, mode="r+")[:CHUNK, :CHUNK] = 7
        start = time.perf_counter()
        while whole(image)[0, 0] != 7:
            time.sleep(0.02)
            if time.perf_counter() - start > 30:
                raise RuntimeError("the change did not show within 30 s")
        return time.perf_counter() - start
    finally:
        zarrfuse("umount", str(mnt))


def delay_remount(work: Path) -> float:
    store, mnt = work / "img", work / "mnt"
    make_image(store)
    mnt.mkdir()
    zarrfuse("mount", str(store), str(mnt), "--format", "ome-tiff", "--no-watch")
    whole(mnt / "img.ome.tif")
    zarr.open_array(store, mode="r+")[:CHUNK, :CHUNK] = 7
    start = time.perf_counter()
    zarrfuse("umount", str(mnt))
    zarrfuse("mount", str(store), str(mnt), "--format", "ome-tiff", "--no-watch")
    try:
        if whole(mnt / "img.ome.tif")[0, 0] != 7:
            raise RuntimeError("the remount shows the old pixels")
        return time.perf_counter() - start
    finally:
        zarrfuse("umount", str(mnt))


def copy_into(work: Path, files: int, *flags: str) -> float:
    store, mnt, sources = work / "arr", work / "mnt", work / "src"
    size = 1 << 20
    zarr.create_array(store, shape=(1, files * size), chunks=(1, size), dtype="u1",
                      compressors=None, fill_value=0)
    sources.mkdir()
    for i in range(files):
        (sources / f"{i:03d}").write_bytes(np.full(size, i % 250 + 1, "u1").tobytes())
    mnt.mkdir()
    zarrfuse("mount", str(store), str(mnt), *flags)
    try:
        target = mnt / "c/0/000/0"
        start = time.perf_counter()
        subprocess.run(["cp", *sorted(str(p) for p in sources.iterdir()), str(target)],
                       check=True, timeout=300)
        return time.perf_counter() - start
    finally:
        zarrfuse("umount", str(mnt))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", type=int, default=128)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {k: [] for k in ("watched", "remount", "cp", "cp-nowatch")}
    for r in range(args.repeat):
        order = [("watched", delay_watched), ("remount", delay_remount),
                 ("cp", lambda w: copy_into(w, args.files)),
                 ("cp-nowatch", lambda w: copy_into(w, args.files, "--no-watch"))]
        for name, run in order[r % 4:] + order[: r % 4]:
            with tempfile.TemporaryDirectory() as work:
                runs[name].append(run(Path(work)))
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["watched"] / med["remount"]
    print(f"change shown in a read-only whole-image mount: {med['watched']:.2f} s "
          f"(remount and read: {med['remount']:.2f} s; ratio {ratio:.2f})")
    ratio = med["cp"] / med["cp-nowatch"]
    print(f"cp of {args.files} x 1 MiB into a writable mount: {med['cp']:.2f} s watched, "
          f"{med['cp-nowatch']:.2f} s --no-watch (ratio {ratio:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
