"""Browsing sparse arrays: ``find`` over a mount costs what is stored, not what the grid allows.

1. ``find`` over a fresh read-only mount of a 10**6 x 10**6 grid of one-byte chunks (10**12
   chunks) holding ``--stored`` chunks, against ``find`` over the store directory itself.
2. ``ls -lR`` over a fresh mount of a dense array (every chunk stored), against ``ls -lR`` of
   the store directory: listing dense arrays must not get slower for knowing about sparsity.

Run as root from the checkout: ``.venv/bin/python bench/bench_sparse.py``. The mount runs
``python -m zarrfuse`` of this interpreter, so ``PYTHONPATH`` selects the tree measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
ENV = {**os.environ, "LC_ALL": "C"}


def make_array(path: Path, shape: tuple[int, ...], points: np.ndarray | None) -> None:
    """One-byte chunks, default ``/`` keys; ``points`` (n x ndim) are the chunks stored, or
    every chunk if None. (zarr's vindex sizes a table by the grid: one write per point.)"""
    a = zarr.create_array(
        str(path), shape=shape, chunks=(1,) * len(shape), dtype="u1", fill_value=0,
        compressors=None,
    )
    if points is None:
        a[...] = 1
    for point in points if points is not None else ():
        a[tuple(int(c) for c in point)] = 1


def timed(cmd: list[str], timeout: float) -> tuple[float, int]:
    """Seconds ``cmd`` took and its output line count; (inf, lines so far) on timeout."""
    start = time.perf_counter()
    try:
        out = subprocess.run(cmd, env=ENV, capture_output=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired as e:
        return float("inf"), (e.stdout or b"").count(b"\n")
    return time.perf_counter() - start, out.stdout.count(b"\n")


def on_fresh_mount(source: Path, mnt: Path, cmd: list[str], timeout: float) -> tuple[float, int]:
    mnt.mkdir(exist_ok=True)
    subprocess.run([*ZARRFUSE, "mount", str(source), str(mnt), "--read-only"], check=True,
                   timeout=60)
    try:
        return timed([*cmd, str(mnt)], timeout)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=False)
        time.sleep(0.2)


def median_runs(source: Path, mnt: Path, cmd: list[str], repeat: int, timeout: float
                ) -> tuple[float, float, int]:
    """Median seconds on fresh mounts and of the store directory itself, and the line count."""
    mounted = [on_fresh_mount(source, mnt, cmd, timeout) for _ in range(repeat)]
    direct = [timed([*cmd, str(source)], timeout) for _ in range(repeat)]
    return (statistics.median(t for t, _ in mounted), statistics.median(t for t, _ in direct),
            mounted[0][1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stored", type=int, default=1000, help="chunks stored in the sparse grid")
    p.add_argument("--dense", default="200,250", help="dense grid shape (default 200,250)")
    p.add_argument("--repeat", type=int, default=3, help="fresh-mount runs per measurement")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before a run gives up")
    p.add_argument("--skip-dense", action="store_true")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="zarrfuse-sparse-") as tmp:
        work = Path(tmp)
        rng = np.random.default_rng(15)
        sparse = work / "sparse"
        make_array(sparse, (10**6, 10**6), rng.integers(0, 10**6, size=(args.stored, 2)))
        m, d, lines = median_runs(sparse, work / "mnt", ["find"], args.repeat, args.timeout)
        results.append((f"find, 10**12-chunk grid, {args.stored} stored ({lines} lines)", m, d))
        if not args.skip_dense:
            shape = tuple(int(n) for n in args.dense.split(","))
            dense = work / "dense"
            make_array(dense, shape, None)
            m, d, lines = median_runs(dense, work / "mnt", ["ls", "-lR"], args.repeat,
                                      args.timeout)
            results.append((f"ls -lR, dense {args.dense} grid ({lines} lines)", m, d))
    print("| measure | zarrfuse (s) | store directory (s) | ratio |")
    print("|---|---|---|---|")
    for label, m, d in results:
        print(f"| {label} | {m:.3f} | {d:.3f} | {m / d:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
