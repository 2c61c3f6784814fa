#!/usr/bin/env python3
"""Write throughput: ``cp`` of N chunk files into a zarrfuse mount vs into the store directory.

One run, side by side. Both sides copy the same N files of 1 MiB with ONE ``cp`` invocation
into ONE directory (so process start-up does not hide anything): the mount's leaf directory
``c/0/000/0/`` (names ``000``..) and the store's chunk directory ``c/0/`` (names ``0``..).
The array is uncompressed uint8 with chunks of one row of 1 MiB, so the bytes written are the
chunks. zarrfuse commits each file at close as a temp file renamed into place (crash safety);
the baseline is a plain ``cp``. Each side runs ``--repeat`` times on fresh arrays, after a
``sync``, in rotating order; the median counts. Floor (issue 4): zarrfuse >= 0.5x direct.

The mount checks every chunk before storing it (the default; here a length check, as the
chunks are uncompressed); the same ``cp`` into a ``--no-verify`` mount runs alongside. Floor
(issue 15): the default >= 0.8x ``--no-verify``.

For reference, the same ``cp`` into ``bindfs`` (a C FUSE passthrough, libfuse) over a fresh
store's chunk directory: what a general-purpose FUSE layer costs on this machine; and into
``null_pyfuse3.py``, a pyfuse3 filesystem that drops every byte: the ceiling for any pyfuse3
daemon before it stores anything. Note that
``cp`` between two local directories copies in the kernel (``copy_file_range``), which no FUSE
filesystem can be handed from another filesystem: into any FUSE mount ``cp`` falls back to
read and write, and every byte crosses to the daemon.

    .venv/bin/python bench/bench_mount_write.py [--files 256] [--repeat 5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_mount_read import run

CHUNK = 1 << 20
FLOOR = 0.5
VERIFY_FLOOR = 0.8


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


def back_free_memory(nbytes: int) -> None:
    """Touch ``nbytes`` of memory and free it again.

    This VM hands free memory back to its host (free page reporting) and takes it back page by
    page, at several times the cost of the copy itself, whenever the guest reuses it. Which
    side of the comparison pays that depends on what ran before, so both sides start from
    memory the host has just backed."""
    block = bytearray(b"\x01") * nbytes
    del block


def timed_cp(sources: Path, target: Path) -> float:
    names = sorted(p.name for p in sources.iterdir())
    subprocess.run(["sync"], check=True)
    back_free_memory(3 * sum(p.stat().st_size for p in sources.iterdir()))
    start = time.perf_counter()
    run(["cp", *names, str(target)], 600.0, cwd=sources, check=True)  # timed to its exit
    return time.perf_counter() - start


def zarrfuse(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "zarrfuse", *args], check=True, timeout=120,
                          capture_output=True, text=True).stdout


def per_file_requests(mnt: Path, files: int) -> str:
    """What the daemon answered per copied file: requests of each kind and their mean time."""
    counters = json.loads(zarrfuse("stats", "--json", str(mnt)))["counters"]
    counts, seconds = counters["requests"], counters.get("request_seconds", {})
    return "  ".join(
        f"{name} {counts[name] / files:.1f}x{1000 * seconds.get(name, 0) / counts[name]:.2f}ms"
        for name in sorted(counts, key=lambda n: -seconds.get(n, 0))
    )


# Every side takes the same arguments (one signature for the loop that rotates them), so
# some sides leave some unused.
def run_direct(work: Path, run: int, view_src: Path, store_src: Path, files: int
               ) -> tuple[float, str]:
    """Seconds for ``cp`` of the files straight into a fresh store's chunk directory."""
    base = work / f"direct-{run}"
    make_array(base, files)
    (base / "c" / "0").mkdir(parents=True)
    return timed_cp(store_src, base / "c" / "0"), ""


def run_mounted(work: Path, run: int, view_src: Path, store_src: Path, files: int,
                *flags: str) -> tuple[float, str]:
    """Seconds for ``cp`` of the files into a fresh store through a zarrfuse mount, and the
    daemon's per-file request profile."""
    name = "-".join(["mounted", *(f.strip("-") for f in flags), str(run)])
    arr, mnt = work / name, work / f"mnt-{name}"
    make_array(arr, files)
    mnt.mkdir()
    zarrfuse("mount", str(arr), str(mnt), *flags)
    try:
        seconds = timed_cp(view_src, mnt / "c/0/000/0")
        profile = per_file_requests(mnt, files)
    finally:
        zarrfuse("umount", str(mnt))
    got = (arr / "c/0" / str(files - 1)).read_bytes()
    assert got == (store_src / str(files - 1)).read_bytes(), "bytes differ"
    return seconds, profile


def run_unverified(work: Path, run: int, view_src: Path, store_src: Path, files: int
                   ) -> tuple[float, str]:
    """The same through a ``--no-verify`` mount: what the default check costs."""
    seconds, _ = run_mounted(work, run, view_src, store_src, files, "--no-verify")
    return seconds, ""


def run_bindfs(work: Path, run: int, view_src: Path, store_src: Path, files: int
               ) -> tuple[float, str]:
    """Seconds for ``cp`` into bindfs mounted over a fresh store's chunk directory."""
    base, mnt = work / f"bindfs-{run}", work / f"mnt-bindfs-{run}"
    make_array(base, files)
    (base / "c" / "0").mkdir(parents=True)
    mnt.mkdir()
    subprocess.run(["bindfs", str(base / "c" / "0"), str(mnt)], check=True, timeout=30)
    try:
        return timed_cp(store_src, mnt), ""
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True, timeout=30)


def run_null_pyfuse3(work: Path, run: int, view_src: Path, store_src: Path, files: int
                     ) -> tuple[float, str]:
    """Seconds for ``cp`` into a pyfuse3 filesystem that drops every byte (null_pyfuse3.py)."""
    mnt = work / f"mnt-null-{run}"
    mnt.mkdir()
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("null_pyfuse3.py")),
                               str(mnt)])
    try:
        deadline = time.monotonic() + 20
        while f" {mnt} " not in Path("/proc/self/mounts").read_text():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("null_pyfuse3 did not mount")
            time.sleep(0.05)
        return timed_cp(store_src, mnt), ""
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, timeout=30)
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    if args.files > 1000:
        parser.error("--files must be at most 1000 (one leaf directory)")
    sides = {"direct": run_direct, "zarrfuse": run_mounted, "--no-verify": run_unverified}
    if shutil.which("bindfs"):
        sides["bindfs"] = run_bindfs
    sides["null pyfuse3"] = run_null_pyfuse3
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-bench-write-", dir=args.workdir))
    try:
        view_src, store_src = make_sources(work, args.files)
        mb = args.files * CHUNK / 1e6
        rates: dict[str, list[float]] = {name: [] for name in sides}
        profile = ""
        names = list(sides)
        for run in range(args.repeat):
            # Rotate which side goes first: what ran before changes how fast memory comes.
            for name in names[run % len(names):] + names[: run % len(names)]:
                seconds, extra = sides[name](work, run, view_src, store_src, args.files)
                rates[name].append(mb / seconds)
                profile = extra or profile
        median = {name: statistics.median(r) for name, r in rates.items()}
        z, d = median["zarrfuse"], median["direct"]
        ratio = z / d
        print(f"{args.files} files of 1 MiB, one cp per side and run, median of {args.repeat}")
        for name, r in rates.items():
            print(f"  runs {name:<12} (MB/s): {[round(x) for x in r]}")
        print(f"daemon, per file (last run): {profile}")
        print()
        print("| measure | zarrfuse | baseline (direct) | ratio | floor | result |")
        print("|---|---|---|---|---|---|")
        print(f"| cp 1 MiB chunk files, MB/s | {z:.0f} | {d:.0f} | {ratio:.2f}x | >= {FLOOR}x "
              f"| {'PASS' if ratio >= FLOOR else 'MISS'} |")
        u = median["--no-verify"]
        print(f"| checked (default) vs --no-verify, MB/s | {z:.0f} | {u:.0f} | {z / u:.2f}x | "
              f">= {VERIFY_FLOOR}x | {'PASS' if z / u >= VERIFY_FLOOR else 'MISS'} |")
        if "bindfs" in median:
            b = median["bindfs"]
            print(f"| reference: bindfs (C FUSE passthrough), MB/s | {b:.0f} | {d:.0f} | "
                  f"{b / d:.2f}x | | |")
            print(f"| zarrfuse vs bindfs | {z:.0f} | {b:.0f} | {z / b:.2f}x | | |")
        n = median["null pyfuse3"]
        print(f"| reference: pyfuse3 dropping every byte, MB/s | {n:.0f} | {d:.0f} | "
              f"{n / d:.2f}x | | |")
        return 0
    finally:
        for mnt in work.glob("mnt-*"):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
