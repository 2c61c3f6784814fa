"""Issue 34's mapped-files load at full size, with its counts beside the floor (all zero).

Readers, private (``MAP_PRIVATE``) and shared read mappers, numpy.memmap r+ and plain mmap
read-write writers and ``cp``-like O_TRUNC writers work on the same chunk files of one
writable mount for ``--seconds``, once as processes and once as threads of one process
(``tests/torture.py``, which the torture tier runs for a few seconds), then fsx-style random
I/O with a shared mapping on one chunk file (``tests/fsx.py``). Printed per run:
operations, wrong reads (a read or mapping that is not one writer's whole value), errors,
deaths (SIGBUS is -7), torn chunks in the store afterwards and the daemon's RSS peak.

    .venv/bin/python bench/bench_torture.py                # 120 s per run, as the issue's load
    .venv/bin/python bench/bench_torture.py --seconds 20   # shorter
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.fsx import run_fsx  # noqa: E402  (after the sys.path insert above)
from tests.mounting import daemon_pid, mounted  # noqa: E402  (after the sys.path insert above)
from tests.torture import make_array, run_load, stored_values  # noqa: E402  (after the insert)

FULL = {"reader": 32, "private_mapper": 8, "shared_mapper": 0, "rw_mapper": 2,
        "rw_mmap": 2, "cp_writer": 2}


def _rss_peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--shared-mappers", type=int, default=4)
    parser.add_argument("--fsx-ops", type=int, default=10_000)
    parser.add_argument("--fsx-seeds", type=int, default=3)
    args = parser.parse_args()
    workers = dict(FULL, shared_mapper=args.shared_mappers)
    print(f"workers: {workers}, {args.chunks} chunks, {args.seconds:g} s per run")
    print(f"{'run':<10} {'ops':>8} {'wrong':>6} {'errors':>7} {'deaths':>7} {'torn':>5} "
          f"{'RSS peak MiB':>13}   floor: wrong, errors, deaths, torn all 0")
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-torture-"))
    failed = False
    try:
        for threads in (False, True):
            run = "threads" if threads else "processes"
            store = work / f"{run}.zarr"
            names = make_array(store, args.chunks)
            with mounted(store, work / f"{run}.mnt") as mnt:
                pid = daemon_pid(mnt)
                result = run_load(mnt, names, args.seconds, workers, threads=threads)
                peak = _rss_peak_kib(pid) / 1024
            torn = stored_values(store, names).count(False)
            errors = sum(result.errors().values())
            print(f"{run:<10} {result.total('ops'):>8} {result.total('wrong'):>6} "
                  f"{errors:>7} {len(result.deaths):>7} {torn:>5} {peak:>13.0f}")
            failed |= bool(result.total("wrong") or errors or result.deaths or torn)
        for seed in range(1, args.fsx_seeds + 1):  # fsx's runs: random I/O with mmap
            store = work / f"fsx{seed}.zarr"
            names = make_array(store, chunks=1)
            with mounted(store, work / f"fsx{seed}.mnt") as mnt:
                pid = daemon_pid(mnt)
                counts = run_fsx(mnt / names[0], (store / "c" / "0").read_bytes,
                                 args.fsx_ops, seed)
                peak = _rss_peak_kib(pid) / 1024
            print(f"{'fsx ' + str(seed):<10} {counts['ops']:>8} {counts['wrong']:>6} "
                  f"{counts['errors']:>7} {0:>7} {'-':>5} {peak:>13.0f}")
            failed |= bool(counts["wrong"] or counts["errors"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("floor met" if not failed else "FLOOR MISSED")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
