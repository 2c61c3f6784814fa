#!/usr/bin/env python3
"""Write throughput: ``cp`` of N chunk files into a zarrfuse mount vs into the store directory.

One run, side by side. Both sides copy the same N files of 1 MiB with ONE ``cp`` invocation
into ONE directory (so process start-up does not hide anything): the mount's leaf directory
``c/0/000/0/`` (names ``000``..) and the store's chunk directory ``c/0/`` (names ``0``..).
The array is uncompressed uint8 with chunks of one row of 1 MiB, so the bytes written are the
chunks. zarrfuse commits each file at close as a temp file renamed into place (crash safety);
the baseline is a plain ``cp``. Each side runs ``--repeat`` times on fresh arrays, after a
``sync``; the median counts. Floor (issue 4): zarrfuse >= 0.5x direct.

    .venv/bin/python bench/bench_mount_write.py [--files 256] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zarr

CHUNK = 1 << 20
FLOOR = 0.5


def make_array(path: Path, files: int) -> None:
    zarr.create_array(path, shape=(1, files * CHUNK), chunks=(1, CHUNK), dtype="u1",
                      compressors=None, fill_value=0)


def make_sources(root: Path, files: int) -> tuple[Path, Path]:
    """Two directories of the same bytes, named as the mount and as the store name chunks."""
    view, store = root / "src-view", root / "src-store"
    view.mkdir()
    store.mkdir()
    for i in range(files):
        data = os.urandom(CHUNK)
        (view / f"{i:03d}").write_bytes(data)
        (store / str(i)).write_bytes(data)
    return view, store


def timed_cp(sources: Path, target: Path) -> float:
    names = sorted(p.name for p in sources.iterdir())
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    subprocess.run(["cp", *names, str(target)], cwd=sources, check=True, timeout=600)
    return time.perf_counter() - start


def zarrfuse(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True, timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    if args.files > 1000:
        parser.error("--files must be at most 1000 (one leaf directory)")
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-bench-write-", dir=args.workdir))
    try:
        view_src, store_src = make_sources(work, args.files)
        mb = args.files * CHUNK / 1e6
        direct, mounted = [], []
        for run in range(args.repeat):
            base = work / f"direct-{run}"
            make_array(base, args.files)
            (base / "c" / "0").mkdir(parents=True)
            direct.append(mb / timed_cp(store_src, base / "c" / "0"))

            arr, mnt = work / f"mounted-{run}", work / f"mnt-{run}"
            make_array(arr, args.files)
            mnt.mkdir()
            zarrfuse("mount", str(arr), str(mnt))
            try:
                mounted.append(mb / timed_cp(view_src, mnt / "c/0/000/0"))
            finally:
                zarrfuse("umount", str(mnt))
            got = (arr / "c/0" / str(args.files - 1)).read_bytes()
            assert got == (store_src / str(args.files - 1)).read_bytes(), "bytes differ"
        z, d = statistics.median(mounted), statistics.median(direct)
        ratio = z / d
        print(f"{args.files} files of 1 MiB, one cp each side, median of {args.repeat}")
        print(f"runs (MB/s): zarrfuse {[round(x) for x in mounted]}  direct {[round(x) for x in direct]}")
        print()
        print("| measure | zarrfuse | baseline (direct) | ratio | floor | result |")
        print("|---|---|---|---|---|---|")
        print(f"| cp 1 MiB chunk files, MB/s | {z:.0f} | {d:.0f} | {ratio:.2f}x | >= {FLOOR}x "
              f"| {'PASS' if ratio >= FLOOR else 'MISS'} |")
        return 0
    finally:
        for mnt in work.glob("mnt-*"):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
