"""Issue 35's copy and whole-image rows, printed by ``bench_per_file.py`` after its per-file
table (one benchmark for the whole issue).

Copies (point 4): ``cp -r`` of a directory of N chunk files of 1 MiB (64 by default) into
tmpfs (``/dev/shm``: the destination costs no disk), through bindfs, the pyfuse3 ceiling and
zarrfuse's raw view (``--read-only`` and default), each on a fresh mount: cold (caches
dropped), then again on the same mount. Floor: at least 0.9x bindfs's pace.

Whole images (point 3): ``tifffile.imread`` of the ``--format ome-tiff`` file of a 4096 x 4096
uint16 image of 256 x 256 zstd chunks, on a fresh mount (``--read-only`` and default), beside
numcodecs decoding the same chunk bytes in one thread (the floor's baseline: 1.0x) and two
readings that cost the daemon nothing: ``tifffile.imread`` of the same file once the kernel
holds all of it (the mount's own page cache) and of a copy on the local disk. And a viewer's
first tile of a 100,000 x 100,000 image on a fresh mount: the header (tifffile), then one
tile's ``pread``; floor under 50 ms.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numcodecs
import numpy as np
import tifffile
import zarr
from zarr.codecs import BytesCodec, ZstdCodec

from bench.bench_mount_read import run

__all__ = ["copy_rows", "image_rows", "verdict"]

MiB = 1 << 20
COPY_FLOOR = 0.9  # zarrfuse's pace / bindfs's, at least
IMAGE_FLOOR = 1.0  # imread's pace / one zstd thread's, at least
FIRST_TILE_FLOOR_S = 0.050
SIDE, TILE = 4096, 256
SLIDE = 100_000
PAGE_CACHED = "imread, all in the page cache (the mount's ceiling)"


def _seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


# --- cp -r ---------------------------------------------------------------------------------


def make_copy_store(root: Path, n: int) -> None:
    """``n`` chunks of 1 MiB, uncompressed random bytes, in one directory (``c/``)."""
    arr = zarr.create_array(str(root), shape=(n * MiB,), chunks=(MiB,), dtype="u1",
                            compressors=None, serializer=BytesCodec())
    rng = np.random.default_rng(4)
    for i in range(n):
        arr[i * MiB : (i + 1) * MiB] = np.frombuffer(rng.bytes(MiB), dtype="u1")


def copy_once(source_dir: str, n: int) -> float:
    """``cp -r`` of the directory into tmpfs, checked by size; the copy removed after."""
    target = Path(tempfile.mkdtemp(prefix="zarrfuse-cp-", dir="/dev/shm"))
    try:
        took = _seconds(lambda: run(["cp", "-r", source_dir, str(target / "c")], 300.0,
                                    check=True))
        copied = sum(p.stat().st_size for p in (target / "c").rglob("*") if p.is_file())
        if copied != n * MiB:
            raise RuntimeError(f"cp -r of {source_dir} copied {copied} bytes, {n * MiB} stored")
        return took
    finally:
        shutil.rmtree(target, ignore_errors=True)


def verdict(ratio: float | None, floor: float, bound: float | None, *,
            at_most: bool = True) -> str:
    """Whether ``ratio`` meets ``floor`` (``at_most``: lower is better), and when it does not,
    whether ``bound`` does: the same measure of a reader that costs a FUSE daemon nothing
    more (the pyfuse3 ceiling, or the mount's own page cache). A floor its bound misses is
    out of reach of any pyfuse3 filesystem on this machine, and the report says so."""
    if ratio is None:
        return "n/a"

    def meets(r: float) -> bool:
        return r <= floor if at_most else r >= floor

    if meets(ratio):
        return "yes"
    if bound is None:
        return "no"
    if meets(bound):
        return f"no (bound {bound:.2f}x meets it)"
    return f"no; out of reach: bound {bound:.2f}x"


def copy_rows(results: dict[str, list[tuple[float, float]]], n: int) -> None:
    """The table of cp -r: ``results`` maps a contender to its (cold, again) seconds."""
    print()
    print(f"`cp -r` of {n} chunk files of 1 MiB into tmpfs, s (medians; floor: zarrfuse at "
          f"least {COPY_FLOOR}x bindfs's pace):")
    print()
    print("| measure | zarrfuse | bindfs | ceiling | zarrfuse pace / bindfs | met (bound: the "
          "ceiling's pace) |")
    print("|---|---:|---:|---:|---:|---|")

    def med(name: str, phase: int) -> float | None:
        runs = results.get(name) or []
        return statistics.median(r[phase] for r in runs) if runs else None

    for phase, label in ((0, "cold"), (1, "again, same mount")):
        b, ceiling = med("bindfs", phase), med("ceiling", phase)
        for name in (k for k in results if k not in ("bindfs", "ceiling")):
            z = med(name, phase)
            pace = b / z if z and b else None
            met = verdict(pace, COPY_FLOOR, b / ceiling if ceiling and b else None,
                          at_most=False)
            print(f"| {label}, {name} | {_cell(z)} | {_cell(b)} | {_cell(ceiling)} "
                  f"| {_cell(pace, '{:.2f}x')} | {met} |")


# --- whole images --------------------------------------------------------------------------


def make_image(root: Path) -> np.ndarray:
    """4096 x 4096 uint16 of zstd 256 x 256 chunks: a gradient with noise, as a camera's."""
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    noise = np.random.default_rng(0).integers(0, 64, (SIDE, SIDE))
    data = ((x * 7 + y * 13) % 4096 + noise).astype("u2")
    arr = zarr.create_array(str(root), shape=data.shape, chunks=(TILE, TILE), dtype="u2",
                            compressors=[ZstdCodec(level=3)])
    arr[:] = data
    return data


def make_slide(root: Path) -> None:
    """100,000 x 100,000 uint16, 256 x 256 zstd chunks, its first 4 x 4 chunks stored."""
    arr = zarr.create_array(str(root), shape=(SLIDE, SLIDE), chunks=(TILE, TILE), dtype="u2",
                            compressors=[ZstdCodec(level=3)], fill_value=0)
    arr[: 4 * TILE, : 4 * TILE] = np.random.default_rng(1).integers(
        0, 4000, (4 * TILE, 4 * TILE)).astype("u2")


def one_zstd_thread(root: Path) -> float:
    """Seconds numcodecs takes to decode every chunk's bytes (read beforehand), one thread.
    Each result is let go at once, so its memory is reused: the fastest reading of the
    baseline (keeping all 32 MB of results costs page faults: about half the pace)."""
    chunks = [p.read_bytes() for p in sorted((root / "c").rglob("*")) if p.is_file()]
    codec = numcodecs.Zstd()
    return _seconds(lambda: sum(len(codec.decode(raw)) for raw in chunks))


def imread_checked(path: Path, expected: np.ndarray) -> float:
    start = time.perf_counter()
    image = tifffile.imread(path)
    took = time.perf_counter() - start
    if not np.array_equal(image, expected):
        raise RuntimeError(f"{path}: the whole image differs from the array")
    return took


def first_tile(path: Path) -> float:
    """A viewer's first look: the header through tifffile, then its first tile's bytes."""
    start = time.perf_counter()
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        offset, count = int(page.dataoffsets[0]), int(page.databytecounts[0])
    fd = os.open(path, os.O_RDONLY)
    try:
        got = len(os.pread(fd, count, offset))
    finally:
        os.close(fd)
    took = time.perf_counter() - start
    if got != count:
        raise RuntimeError(f"{path}: first tile {got} bytes, {count} in the header")
    return took


def image_rows(results: dict[str, list[float]]) -> None:
    """The whole-image table: ``results`` maps a measure to its seconds per round."""
    image_mb = SIDE * SIDE * 2 / 1e6

    def pace(name: str) -> float | None:
        runs = results.get(name) or []
        return image_mb / statistics.median(runs) if runs else None

    base = pace("one zstd thread")
    print()
    print(f"Whole image {SIDE} x {SIDE} uint16, zstd {TILE} x {TILE}, MB/s of pixels "
          f"(medians; floor: imread on a fresh mount at least {IMAGE_FLOOR}x one zstd thread):")
    print()
    print("| measure | MB/s | / one zstd thread | met (bound: all in the page cache) |")
    print("|---|---:|---:|---|")
    cached = pace(PAGE_CACHED)
    bound = cached / base if cached and base else None
    for name in results:
        if name.startswith("first tile"):
            continue
        p = pace(name)
        ratio = p / base if p and base else None
        met = verdict(ratio, IMAGE_FLOOR, bound, at_most=False) if name.startswith(
            "imread, fresh") else ""
        print(f"| {name} | {_cell(p, '{:.0f}')} | {_cell(ratio, '{:.2f}x')} | {met} |")
    print()
    print(f"A viewer's first tile of a {SLIDE:,} x {SLIDE:,} image on a fresh mount "
          f"(header + one tile), ms (medians; floor under {FIRST_TILE_FLOOR_S * 1000:.0f} ms):")
    print()
    print("| measure | ms | met |")
    print("|---|---:|---|")
    for name in (k for k in results if k.startswith("first tile")):
        t = statistics.median(results[name]) if results[name] else None
        met = "n/a" if t is None else ("yes" if t < FIRST_TILE_FLOOR_S else "no")
        print(f"| {name} | {_cell(None if t is None else t * 1000, '{:.1f}')} | {met} |")


def _cell(v: float | None, fmt: str = "{:.3f}") -> str:
    return "failed" if v is None else fmt.format(v)


def image_round(image: Path, slide: Path, expected: np.ndarray, local_copy: Path,
                mount: Callable[[Path, Sequence[str]], object],
                unmount: Callable[[], None], mountpoint: Path,
                results: dict[str, list[float]]) -> None:
    """One round of every whole-image measure; ``mount(store, options)`` mounts on
    ``mountpoint`` (a fresh daemon), ``unmount()`` lets it go."""
    results.setdefault("one zstd thread", []).append(one_zstd_thread(image))
    for options, label in ((("--read-only",), "--read-only"), ((), "default")):
        mount(image, ["--format", "ome-tiff", *options])
        try:
            path = mountpoint / f"{image.name.removesuffix('.zarr')}.ome.tif"
            results.setdefault(f"imread, fresh mount, {label}", []).append(
                imread_checked(path, expected))
            if label == "--read-only":
                subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True,
                               timeout=120)  # now every byte is in the kernel's page cache
                results.setdefault(PAGE_CACHED, []).append(imread_checked(path, expected))
                if not local_copy.exists():
                    shutil.copyfile(path, local_copy)
        finally:
            unmount()
    results.setdefault("imread of a copy on the local disk", []).append(
        imread_checked(local_copy, expected))  # made from the --read-only mount above
    for options, label in ((("--read-only",), "--read-only"), ((), "default")):
        mount(slide, ["--format", "ome-tiff", *options])
        try:
            path = mountpoint / f"{slide.name.removesuffix('.zarr')}.ome.tif"
            results.setdefault(f"first tile, {label}", []).append(first_tile(path))
        finally:
            unmount()


if __name__ == "__main__":
    sys.exit("run bench/bench_per_file.py: it prints these rows")
