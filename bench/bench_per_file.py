#!/usr/bin/env python3
"""Issue 35's per-file table: reading many small chunk files through zarrfuse, bindfs and a
pyfuse3 passthrough, side by side in one run.

One zarr v3 array of N chunks of 64 KiB (uint8, uncompressed, random bytes; N = 2000 by
default) is read file by file through seven contenders, each on a fresh mount per round:

- ``bindfs -f --no-allow-other STORE`` (a C passthrough: the baseline of the floors);
- ``passthrough_pyfuse3.py STORE``: the ceiling, what pyfuse3 alone costs; and the same
  answering every FLUSH (``--flush``), the ceiling of a mount that must see each close;
- ``zarrfuse mount`` of the array in the raw view, ``--read-only`` and writable (the default);
- the same in ``--format tiff``, ``--read-only`` and writable.

Each round mounts every contender in turn (the order rotates from round to round), lists its
chunk files (``os.walk``, untimed), ``sync``s and drops the kernel's caches
(``/proc/sys/vm/drop_caches``), then times reading every file (open, 1 MiB reads, close, in
this process): the cold pass; then the same files again on the same mount: the second pass;
then, after dropping the caches again, once more on the same mount (names and open chunks
kept, no page cached). The report gives medians over the rounds, zarrfuse / bindfs for each,
and the floors: cold <= 1.5x bindfs (both cold passes), second pass <= 1.2x bindfs. It also
splits the second pass's per-file cost into open, read and close. Then (``--listing N``,
100,000 by default) an array of N one-byte chunks is listed with ``find -type f`` and ``ls
-lR`` through bindfs and zarrfuse (raw, ``--read-only`` and default), each on a fresh mount
with dropped caches: floor <= 1.5x bindfs. Then ``cp -r`` of 64 chunk files of 1 MiB
(``--copy N``) and the whole-image rows (``tifffile.imread`` against one zstd thread; a
100,000 x 100,000 image's first tile), from ``copy_and_image_rows.py``. A floor missed is
shown beside its bound, the same measure of what costs a FUSE daemon nothing more: the
ceiling (on a writable mount, the ceiling answering FLUSH; for whole images, the file all in
the page cache). A floor its bound misses too is out of reach of any pyfuse3 filesystem on
the machine, and the report says so. The exit status is 0 whichever floors are met: it is a
report.

    .venv/bin/python bench/bench_per_file.py             # 2000 files, 3 rounds
    .venv/bin/python bench/bench_per_file.py --quick     # 200 files, 1 round (smoke run)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import zarr  # noqa: E402  (after the sys.path insert above)
from zarr.codecs import BytesCodec  # noqa: E402  (after the sys.path insert above)

from bench import copy_and_image_rows as extra  # noqa: E402  (after the sys.path insert)
from bench.bench_mount_read import (  # noqa: E402  (after the sys.path insert above)
    CMD_TIMEOUT,
    DEFAULT_ZARRFUSE,
    MOUNT_TIMEOUT,
    WATCHDOG,
    BindfsMount,
    Mount,
    Mounts,
    OutsideLoad,
    ZarrfuseMount,
    log,
    median,
    mountpoints,
    run,
    store_key,
    view_key,
)

KiB, MiB = 1 << 10, 1 << 20
CHUNK = 64 * KiB
SYNC_TIMEOUT = 300.0  # `sync` with other work writing on the same disk
PASSTHROUGH = HERE / "passthrough_pyfuse3.py"
REPO = HERE.parent
COLD_FLOOR, SECOND_FLOOR = 1.5, 1.2  # zarrfuse / bindfs, at most (issue 35)
EVICTED = "cold again, same mount"
"""A third pass after the page cache is dropped once more: the files' names and the chunks
a mount keeps open are still known, their bytes are not (a viewer paging back through
images after memory pressure). Held to the cold floor."""


# --- contenders --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Contender:
    name: str
    kind: str  # "bindfs", "ceiling" or "zarrfuse"
    options: tuple[str, ...] = ()  # zarrfuse mount options
    suffix: str = ""  # of the chunk files in the zarrfuse view


BINDFS = Contender("bindfs", "bindfs")
CEILING = Contender("ceiling", "ceiling")
FLUSHED_CEILING = Contender("ceiling, FLUSH answered", "ceiling", ("--flush",))
"""The ceiling of a mount that must see every close (a writable one reports a refused
commit there): pyfuse3 has no ``noflush``, so each close is one more round trip."""
ZARRFUSE = (
    Contender("raw --read-only", "zarrfuse", ("--read-only",)),
    Contender("raw default", "zarrfuse"),
    Contender("tiff --read-only", "zarrfuse", ("--format", "tiff", "--read-only"), ".tiff"),
    Contender("tiff default", "zarrfuse", ("--format", "tiff"), ".tiff"),
)
CONTENDERS = (BINDFS, CEILING, FLUSHED_CEILING, *ZARRFUSE)


class ForegroundMount(BindfsMount):
    """A FUSE daemon run in the foreground as our child (bindfs, the passthrough), unmounted
    with ``fusermount3 -u`` (lazily, after aborting the connection, if that fails)."""

    def __init__(self, argv: Sequence[str], source: Path, mountpoint: Path, log_path: Path):
        super().__init__(source, mountpoint)
        self.kind = Path(argv[0]).name if argv[0] != sys.executable else "passthrough_pyfuse3"
        self.argv = [*argv, self.source, self.mountpoint]
        self.log_path = log_path

    def mount(self) -> None:
        # stderr to a file, not a pipe: a daemon that writes much cannot block on it
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while self.mountpoint not in mountpoints():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} did not mount in {MOUNT_TIMEOUT} s")
            time.sleep(0.01)
        self._live()
        self.pid = self.proc.pid


class OptionsZarrfuseMount(ZarrfuseMount):
    """``zarrfuse mount SRC MNT OPTIONS...`` (the read benchmark's mount is --read-only only)."""

    def __init__(self, source: Path, mountpoint: Path, options: Sequence[str]) -> None:
        super().__init__(source, mountpoint)
        self.options = list(options)

    def mount(self) -> None:
        run([self.executable, "mount", self.source, self.mountpoint, *self.options],
            timeout=MOUNT_TIMEOUT, check=True)
        self._live()
        self.pid = self._find_daemon()


def make_mount(c: Contender, store: Path, mountpoint: Path, work: Path) -> Mount:
    if c.kind == "bindfs":
        return ForegroundMount(["bindfs", "-f", "--no-allow-other"], store, mountpoint,
                               work / "bindfs.log")
    if c.kind == "ceiling":
        return ForegroundMount([sys.executable, str(PASSTHROUGH), *c.options], store,
                               mountpoint, work / "passthrough.log")
    return OptionsZarrfuseMount(store, mountpoint, c.options)


def expected_files(c: Contender, n: int) -> list[str]:
    """Each chunk file's path in the contender's view, in chunk order: the store's own keys
    through the passthroughs, zarrfuse's fanout names (c/0/999, then c/1/001/000) otherwise."""
    if c.kind == "zarrfuse":
        return [view_key((i,)) + c.suffix for i in range(n)]
    return [store_key((i,)) for i in range(n)]


# --- data and passes ---------------------------------------------------------------------------


def make_store(root: Path, n: int) -> None:
    """The array, written by zarr-python; each chunk file is exactly its 64 KiB of bytes."""
    arr = zarr.create_array(str(root), shape=(n * CHUNK,), chunks=(CHUNK,), dtype="u1",
                            compressors=None, serializer=BytesCodec())
    rng = np.random.default_rng(35)
    step = 256  # chunks per write: bounded memory
    for i in range(0, n, step):
        j = min(n, i + step)
        arr[i * CHUNK : j * CHUNK] = np.frombuffer(rng.bytes((j - i) * CHUNK), dtype="u1")
    for i in range(n):
        size = os.path.getsize(root / store_key((i,)))
        if size != CHUNK:
            raise RuntimeError(f"{store_key((i,))}: {size} bytes stored, {CHUNK} expected")


def list_files(c: Contender, mountpoint: str, n: int) -> list[str]:
    """The chunk files found by walking the mount's c/ (untimed), checked against the names
    expected, in chunk order."""
    seen: set[str] = set()
    for dirpath, _dirs, files in os.walk(os.path.join(mountpoint, "c")):
        seen.update(os.path.relpath(os.path.join(dirpath, f), mountpoint) for f in files)
    want = expected_files(c, n)
    if seen != set(want):
        odd = sorted(seen ^ set(want))[:5]
        raise RuntimeError(f"{c.name}: {len(seen)} chunk files listed, {n} expected; e.g. {odd}")
    return [os.path.join(mountpoint, p) for p in want]


def drop_caches() -> None:
    """Write dirty pages back, then drop the page cache, dentries and inodes (every mount's
    and the store's): the next pass starts cold everywhere."""
    run(["sync"], timeout=SYNC_TIMEOUT, check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


@dataclass
class Pass:
    seconds: float  # wall time of the whole pass
    nbytes: int
    open_s: float  # sums over the files of each call's time
    read_s: float
    close_s: float


def read_all(paths: Sequence[str], buf: bytearray) -> Pass:
    """Open, read in full (reads of len(buf)) and close every file, timing each call."""
    clock = time.perf_counter
    bufs = [buf]
    total = 0
    open_s = read_s = close_s = 0.0
    start = clock()
    for path in paths:
        t0 = clock()
        fd = os.open(path, os.O_RDONLY)
        t1 = clock()
        try:
            while n := os.readv(fd, bufs):
                total += n
        finally:
            t2 = clock()
            os.close(fd)
            t3 = clock()
        open_s, read_s, close_s = open_s + t1 - t0, read_s + t2 - t1, close_s + t3 - t2
    return Pass(clock() - start, total, open_s, read_s, close_s)


def one_round(c: Contender, store: Path, work: Path, mounts: Mounts, n: int, buf: bytearray,
              timeout: float) -> tuple[Pass, Pass, Pass]:
    """Mount fresh, list, drop caches, cold pass, second pass, drop caches again and read
    once more on the same mount (what a mount kept open, and no page cached), unmount (in a
    finally)."""
    m = make_mount(c, store, work / "mnt" / c.name.replace(" ", "_").replace("-", ""), work)
    mounts.live.append(m)
    try:
        m.mount()
        WATCHDOG.arm(timeout, f"{c.name}: list")
        paths = list_files(c, m.mountpoint, n)
        WATCHDOG.disarm()
        drop_caches()
        passes = []
        for label in ("cold", "second", "evicted"):
            if label == "evicted":
                drop_caches()
            WATCHDOG.arm(timeout, f"{c.name}: {label} pass")
            load = OutsideLoad(m.pid)
            p = read_all(paths, buf)
            outside = load.stop()
            WATCHDOG.disarm()
            log(f"    {c.name:17s} {label:6s} {p.seconds:7.3f} s  "
                f"{p.nbytes / p.seconds / 1e6:7.1f} MB/s  outside load {outside:.0%}")
            passes.append(p)
        low = n * CHUNK
        for p in passes:
            if p.nbytes < low or (not c.suffix and p.nbytes != low):
                raise RuntimeError(f"{c.name}: read {p.nbytes} bytes, expected {low}")
        if not c.suffix:  # the raw views show the stored bytes: spot-check two files
            for i in sorted({0, n - 1}):
                with open(paths[i], "rb") as f, open(store / store_key((i,)), "rb") as g:
                    if f.read() != g.read():
                        raise RuntimeError(f"{c.name}: {paths[i]} differs from the store")
        return passes[0], passes[1], passes[2]
    finally:
        WATCHDOG.disarm()
        mounts.drop(m)


# --- listings ----------------------------------------------------------------------------------

LISTING_FLOOR = 1.5  # zarrfuse / bindfs, at most (issue 35, point 5)
LISTERS = (BINDFS, CEILING, ZARRFUSE[0], ZARRFUSE[1])
LISTINGS = {
    "find -type f (counted)": lambda m: ["find", m, "-type", "f"],
    "ls -lR": lambda m: ["ls", "-lR", m],
}


def make_listing_store(root: Path, n: int) -> None:
    """An array of ``n`` one-byte chunks (a fanout tree of n files), written by zarr-python."""
    arr = zarr.create_array(str(root), shape=(n,), chunks=(1,), dtype="u1",
                            compressors=None, serializer=BytesCodec(), fill_value=0)
    step = 10_000
    for i in range(0, n, step):
        j = min(n, i + step)
        arr[i:j] = np.full(j - i, 7, dtype="u1")


def listing_round(c: Contender, store: Path, work: Path, mounts: Mounts, n: int,
                  timeout: float) -> dict[str, float]:
    """Each listing on a fresh mount with dropped caches (the kernel knows no name yet)."""
    out = {}
    for label, argv in LISTINGS.items():
        m = make_mount(c, store, work / "lmnt" / c.name.replace(" ", "_").replace("-", ""),
                       work)
        mounts.live.append(m)
        try:
            m.mount()
            drop_caches()
            WATCHDOG.arm(timeout, f"{c.name}: {label}")
            start = time.perf_counter()
            done = run(argv(m.mountpoint), stdout=subprocess.PIPE, timeout=timeout, check=True)
            out[label] = time.perf_counter() - start
            WATCHDOG.disarm()
            if label.startswith("find"):
                files = done.stdout.count(b"\n")
                if files < n:
                    raise RuntimeError(f"{c.name}: find saw {files} files, {n} chunks stored")
            log(f"    {c.name:17s} {label:22s} {out[label]:7.3f} s")
        finally:
            WATCHDOG.disarm()
            mounts.drop(m)
    return out


def report_listings(results: dict[str, list[dict[str, float]]], n: int) -> None:
    print()
    print(f"Listings of a {n}-chunk fanout tree on a fresh mount, caches dropped, s (medians):")
    print()
    print("| measure | zarrfuse | bindfs | ceiling | zarrfuse / bindfs | floor | met (bound: "
          "the ceiling) |")
    print("|---|---:|---:|---:|---:|---|---|")

    def med(name: str, label: str) -> float | None:
        return median(r[label] for r in results[name]) if results[name] else None

    for label in LISTINGS:
        b, ceiling = med(BINDFS.name, label), med(CEILING.name, label)
        for c in LISTERS[2:]:
            runs = results[c.name]
            z = median(r[label] for r in runs) if runs else None
            ratio = z / b if z is not None and b else None
            met = extra.verdict(ratio, LISTING_FLOOR, ceiling / b if ceiling and b else None)
            zc = "failed" if z is None else f"{z:.3f}"
            bc = "failed" if b is None else f"{b:.3f}"
            rc = "n/a" if ratio is None else f"{ratio:.2f}x"
            cc = "failed" if ceiling is None else f"{ceiling:.3f}"
            print(f"| {label}, {c.name} | {zc} | {bc} | {cc} | {rc} | <= {LISTING_FLOOR}x "
                  f"bindfs | {met} |")


# --- report ------------------------------------------------------------------------------------


def revision() -> str:
    """The checkout's commit, +dirty if zarrfuse/ has uncommitted changes (the virtualenv's
    zarrfuse is an editable install: mounts run the working tree)."""
    try:
        head = run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                   stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
        dirty = run(["git", "-C", str(REPO), "status", "--porcelain", "--", "zarrfuse/"],
                    stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
    except (subprocess.SubprocessError, OSError) as e:
        return f"unknown ({e})"
    return head + ("+dirty" if dirty else "")


def report(results: dict[str, list[tuple[Pass, Pass, Pass]]], failures: dict[str, list[str]],
           n: int, rounds: int, elapsed: float) -> None:
    def med(name: str, phase: int) -> float | None:
        runs = results[name]
        return median(r[phase].seconds for r in runs) if runs else None

    def cell(v: float | None, fmt: str = "{:.3f}") -> str:
        return "failed" if v is None else fmt.format(v)

    print()
    print(f"## zarrfuse per-file reads (issue 35): {n} files of {CHUNK // KiB} KiB, "
          f"{rounds} round(s), medians")
    print()
    print(f"date {time.strftime('%Y-%m-%d %H:%M:%S %z')}; kernel {os.uname().release}; "
          f"nproc {len(os.sched_getaffinity(0))}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; zarrfuse {revision()}; "
          f"run took {elapsed:.0f} s")
    print()
    print("| measure | zarrfuse | bindfs | ceiling | zarrfuse / bindfs | floor | met (bound: "
          "the ceiling; on a writable mount, the ceiling answering FLUSH) |")
    print("|---|---:|---:|---:|---:|---|---|")
    for phase, label, floor in ((0, "cold", COLD_FLOOR), (1, "second pass", SECOND_FLOOR),
                                (2, EVICTED, COLD_FLOOR)):
        b, ceiling = med(BINDFS.name, phase), med(CEILING.name, phase)
        flushed = med(FLUSHED_CEILING.name, phase)
        for c in ZARRFUSE:
            z = med(c.name, phase)
            ratio = z / b if z is not None and b else None
            bound = flushed if "--read-only" not in c.options else ceiling
            met = extra.verdict(ratio, floor, bound / b if bound is not None and b else None)
            print(f"| {label}, {c.name}, s | {cell(z)} | {cell(b)} | {cell(ceiling)} "
                  f"| {cell(ratio, '{:.2f}x')} | <= {floor}x bindfs | {met} |")
        ratio = flushed / b if flushed is not None and b else None
        print(f"| {label}, {FLUSHED_CEILING.name} (no zarrfuse), s | {cell(flushed)} | "
              f"{cell(b)} | {cell(ceiling)} | {cell(ratio, '{:.2f}x')} | the bound of a "
              "writable mount | |")
    print()
    print("Per-file cost on the second pass, ms (calls timed one by one, summed, divided by "
          "the file count):")
    print()
    print("| contender | open | read | close | open+read+close |")
    print("|---|---:|---:|---:|---:|")
    for c in (ZARRFUSE[0], ZARRFUSE[1], BINDFS, CEILING, FLUSHED_CEILING):
        runs = [second for _cold, second, _evicted in results[c.name]]
        if not runs:
            print(f"| {c.name} | failed | failed | failed | failed |")
            continue
        parts = [median(getattr(p, k) for p in runs) / n * 1000
                 for k in ("open_s", "read_s", "close_s")]
        print(f"| {c.name} | {parts[0]:.3f} | {parts[1]:.3f} | {parts[2]:.3f} "
              f"| {sum(parts):.3f} |")
    for name, errors in failures.items():
        for e in errors:
            print(f"\n{name}: failed: {e}")


# --- copies and whole images (copy_and_image_rows.py) ------------------------------------------

COPIERS = (BINDFS, CEILING, ZARRFUSE[0], ZARRFUSE[1])


def copy_round(c: Contender, store: Path, work: Path, mounts: Mounts, n: int,
               timeout: float) -> tuple[float, float]:
    """``cp -r`` of the mount's ``c/`` into tmpfs on a fresh mount, cold then again."""
    m = make_mount(c, store, work / "cmnt" / c.name.replace(" ", "_").replace("-", ""), work)
    mounts.live.append(m)
    try:
        m.mount()
        drop_caches()
        WATCHDOG.arm(timeout, f"{c.name}: cp -r")
        cold = extra.copy_once(os.path.join(m.mountpoint, "c"), n)
        again = extra.copy_once(os.path.join(m.mountpoint, "c"), n)
        log(f"    {c.name:17s} cp -r cold {cold:.3f} s, again {again:.3f} s")
        return cold, again
    finally:
        WATCHDOG.disarm()
        mounts.drop(m)


def image_rounds(work: Path, mounts: Mounts, rounds: int, timeout: float) -> dict[str, list]:
    image, slide = work / "image.zarr", work / "slide.zarr"
    expected = extra.make_image(image)
    extra.make_slide(slide)
    mountpoint = work / "imnt"
    held: list[Mount] = []

    def mount(store: Path, options: Sequence[str]) -> None:
        m = OptionsZarrfuseMount(store, mountpoint, options)
        mounts.live.append(m)
        held.append(m)
        m.mount()

    def unmount() -> None:
        mounts.drop(held.pop())

    results: dict[str, list[float]] = {}
    for rnd in range(rounds):
        log(f"whole images: round {rnd + 1}/{rounds}")
        WATCHDOG.arm(timeout, "whole images")
        try:
            extra.image_round(image, slide, expected, work / "local.ome.tif", mount, unmount,
                              mountpoint, results)
        finally:
            WATCHDOG.disarm()
    return results


# --- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue 35's per-file read table, in one run.")
    p.add_argument("--files", type=int, default=2000, help="chunk files of 64 KiB (2000)")
    p.add_argument("--rounds", type=int, default=3, help="fresh-mount rounds (3)")
    p.add_argument("--quick", action="store_true", help="smoke run: 200 files, 1 round")
    p.add_argument("--phase-timeout", type=float, default=300.0,
                   help="seconds before the watchdog aborts the FUSE connections (300)")
    p.add_argument("--zarrfuse", default=str(DEFAULT_ZARRFUSE), help="zarrfuse executable")
    p.add_argument("--workdir", type=Path, help="scratch directory's parent (default: /tmp)")
    p.add_argument("--listing", type=int, default=100_000, metavar="N",
                   help="chunks of the listed fanout tree (100000; 0: no listing rows)")
    p.add_argument("--copy", type=int, default=64, metavar="N",
                   help="chunk files of 1 MiB copied with cp -r (64; 0: no copy rows)")
    p.add_argument("--no-image", action="store_true", help="leave out the whole-image rows")
    args = p.parse_args(argv)
    if args.quick:
        args.files, args.rounds, args.listing = 200, 1, min(args.listing, 2000)
        args.copy = min(args.copy, 16)
    ZarrfuseMount.executable = args.zarrfuse
    for tool in ("bindfs", "fusermount3", "sync"):
        if shutil.which(tool) is None:
            print(f"missing {tool} (apt-get install -y bindfs fuse3)", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("run as root: the script drops the kernel's caches", file=sys.stderr)
        return 2

    started = time.perf_counter()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-bench-", dir=args.workdir))
    store = work / "store.zarr"
    mounts = Mounts()
    results: dict[str, list[tuple[Pass, Pass, Pass]]] = {c.name: [] for c in CONTENDERS}
    listed: dict[str, list[dict[str, float]]] = {c.name: [] for c in LISTERS}
    failures: dict[str, list[str]] = {}
    copied: dict[str, list[tuple[float, float]]] = {c.name: [] for c in COPIERS}
    images: dict[str, list[float]] = {}
    try:
        log(f"writing {args.files} chunks of {CHUNK // KiB} KiB to {store}")
        make_store(store, args.files)
        run(["sync"], timeout=SYNC_TIMEOUT, check=True)
        buf = bytearray(MiB)
        for rnd in range(args.rounds):
            order = CONTENDERS[rnd % len(CONTENDERS):] + CONTENDERS[: rnd % len(CONTENDERS)]
            log(f"round {rnd + 1}/{args.rounds}: {', '.join(c.name for c in order)}")
            for c in order:
                try:
                    results[c.name].append(one_round(c, store, work, mounts, args.files, buf,
                                                     args.phase_timeout))
                # a report: one contender's failure is printed, the others still run
                except Exception as e:  # noqa: BLE001  (see above)
                    log(f"!! {c.name}: {type(e).__name__}: {e}")
                    failures.setdefault(c.name, []).append(f"round {rnd + 1}: {e}")
        if args.listing:
            tree = work / "tree.zarr"
            log(f"writing {args.listing} chunks of 1 byte to {tree}")
            make_listing_store(tree, args.listing)
            run(["sync"], timeout=SYNC_TIMEOUT, check=True)
            for rnd in range(args.rounds):
                order = LISTERS[rnd % len(LISTERS):] + LISTERS[: rnd % len(LISTERS)]
                for c in order:
                    try:
                        listed[c.name].append(listing_round(c, tree, work, mounts,
                                                            args.listing, args.phase_timeout))
                    except Exception as e:  # noqa: BLE001  (a report, as above)
                        log(f"!! {c.name}: {type(e).__name__}: {e}")
                        failures.setdefault(c.name, []).append(f"listing {rnd + 1}: {e}")
        if args.copy:
            copies = work / "copies.zarr"
            log(f"writing {args.copy} chunks of 1 MiB to {copies}")
            extra.make_copy_store(copies, args.copy)
            run(["sync"], timeout=SYNC_TIMEOUT, check=True)
            for rnd in range(args.rounds):
                for c in COPIERS[rnd % len(COPIERS):] + COPIERS[: rnd % len(COPIERS)]:
                    try:
                        copied[c.name].append(copy_round(c, copies, work, mounts, args.copy,
                                                         args.phase_timeout))
                    except Exception as e:  # noqa: BLE001  (a report, as above)
                        log(f"!! {c.name}: {type(e).__name__}: {e}")
                        failures.setdefault(c.name, []).append(f"cp -r {rnd + 1}: {e}")
        if not args.no_image:
            try:
                images = image_rounds(work, mounts, args.rounds, args.phase_timeout)
            except Exception as e:  # noqa: BLE001  (a report, as above)
                log(f"!! whole images: {type(e).__name__}: {e}")
                failures.setdefault("whole images", []).append(str(e))
    finally:
        WATCHDOG.disarm()
        mounts.close()
        for m in mountpoints():
            if m.startswith(str(work)):  # left behind by a failed mount: lazily
                subprocess.run(["fusermount3", "-u", "-z", m], timeout=CMD_TIMEOUT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    report(results, failures, args.files, args.rounds, time.perf_counter() - started)
    if args.listing:
        report_listings(listed, args.listing)
    if args.copy:
        extra.copy_rows(copied, args.copy)
    if images:
        extra.image_rows(images)
    return 0


if __name__ == "__main__":
    sys.exit(main())
