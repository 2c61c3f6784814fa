"""A whole image read through the mount (issue 14, issue 35 point 3, issue 55 point 1): the
``--format ome-tiff`` file of a 4096 x 4096 uint16 image of 256 x 256 zstd chunks
(``--quick``: 1024 x 1024), each read on a fresh mount, every pixel checked where a reader
decodes: ``tifffile.imread`` (``--read-only`` and default), every tile by one ``pread`` in
file order, the tile data in 1 MiB reads, every file of the ``--format tiff`` view and, for
scale, of the raw view. Baselines, in this process: numcodecs decoding the chunk bytes in
one thread, and zarr-python reading the array. Bound: ``imread`` of the same file once
``cat`` has put all of it in the mount's page cache (costs the daemon nothing). Issue 55
reads the whole file three ways, ``imread``, ``cp`` and GDAL's ``gdal_translate`` (both into
tmpfs, checked), each beside zarr-python and beside itself on the page cache; bound: the same
reader on the pyfuse3 ceiling (``bench/passthrough_pyfuse3.py`` over a local copy, a fresh
mount: FUSE through pyfuse3 with no decoding). Floors: imread >= 1.0x one zstd thread
(issue 35); each reader >= 1.5x zarr-python and >= 0.8x the page cache (issue 55); tiles,
blocks and TIFF files >= 0.5x one zstd thread (issue 14). Then a 100,000 x 100,000 image
on a fresh mount: the header and first tile (floor < 50 ms, issue 35) and the header with
every tile offset (floor < 1 s, issue 14; no chunk decoded; beside the same header in a
local file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numcodecs
import numpy as np
import tifffile
import zarr

from bench.data import TILE, make_image, make_slide
from bench.harness import (
    MB,
    ZARRFUSE,
    Context,
    Row,
    at_least,
    at_most,
    proc_field,
    run,
    seconds,
    timed,
)
from bench.scenarios.fuse_peers import CEILING

ISSUE = "35"
SHM = Path("/dev/shm")  # where cp and gdal_translate write: no disk in the figure


def imread(path: Path, expected: np.ndarray) -> float:
    image: list[np.ndarray] = []
    took = seconds(lambda: image.append(tifffile.imread(path)))
    if not np.array_equal(image[0], expected):
        raise RuntimeError(f"{path}: the whole image differs from the array")
    return took


def into_tmpfs(*command: str) -> Callable[[Path, np.ndarray], float]:
    """A reader of the whole file that writes a TIFF into tmpfs (``command SOURCE OUT``,
    timed to its exit: ``cp``, ``gdal_translate``), the TIFF checked against the array."""
    def read(path: Path, expected: np.ndarray) -> float:
        out = SHM / f"zarrfuse-bench-{command[0]}.tif"
        try:
            took = timed([*command, path, out])
            if not np.array_equal(tifffile.imread(out), expected):
                raise RuntimeError(f"{path}: {command[0]}'s TIFF differs from the array")
            return took
        finally:
            out.unlink(missing_ok=True)
    return read


def tiles(path: Path, nbytes: int, block: int | None = None) -> float:
    """Every tile by one ``pread`` in file order, or the tile data in ``block`` reads; all
    ``nbytes`` of them."""
    with tifffile.TiffFile(path) as tif:
        offsets, counts = tif.pages[0].dataoffsets, tif.pages[0].databytecounts
    order = np.argsort(offsets)
    fd = os.open(path, os.O_RDONLY)
    got = [0]

    def each() -> None:
        got[0] = sum(len(os.pread(fd, int(counts[i]), int(offsets[i]))) for i in order)

    def through() -> None:
        at, end = int(offsets[order[0]]), path.stat().st_size
        while at < end:
            n = len(os.pread(fd, min(block or 0, end - at), at))
            at, got[0] = at + n, got[0] + n

    try:
        took = seconds(each if block is None else through)
    finally:
        os.close(fd)
    if got[0] != nbytes:
        raise RuntimeError(f"{path}: read {got[0]} bytes of tiles, {nbytes} expected")
    return took


def files(root: Path, suffix: str) -> float:
    """Every chunk file of a view read in directory order (the walk untimed)."""
    paths = sorted(p for p in root.rglob(f"*{suffix}") if p.is_file() and p.name != "zarr.json")
    return seconds(lambda: [p.read_bytes() for p in paths])


def first_tile(path: Path, centre: bool = False) -> float:
    """A viewer's first look: the header through tifffile, then its first (``centre``: its
    centre) tile's bytes."""
    def look() -> None:
        with tifffile.TiffFile(path) as tif:
            page = tif.pages[0]
            across = -(-page.imagewidth // page.tilewidth)
            i = (-(-page.imagelength // page.tilelength) // 2 * across + across // 2
                 if centre else 0)
            at, n = int(page.dataoffsets[i]), int(page.databytecounts[i])
        with open(path, "rb", buffering=0) as f:
            if len(os.pread(f.fileno(), n, at)) != n:
                raise RuntimeError(f"{path}: short first tile")
    return seconds(look)


def header(path: Path, side: int) -> float:
    def read() -> None:
        with tifffile.TiffFile(path) as tif:
            if tif.series[0].shape != (side, side) or len(tif.pages[0].dataoffsets) != (
                    -(-side // TILE)) ** 2:
                raise RuntimeError(f"{path}: wrong header")
    return seconds(read)


def measure(ctx: Context) -> list[Row]:
    side, slide_side = ctx.pick(4096, 1024), ctx.pick(100_000, 20_000)
    image, slide = ctx.work / "image.zarr", ctx.work / "slide.zarr"
    expected = make_image(image, side)
    make_slide(slide, slide_side)
    chunks = [p.read_bytes() for p in sorted((image / "c").rglob("*")) if p.is_file()]
    codec, local = numcodecs.Zstd(), ctx.work / "copy" / "image.ome.tif"
    local.parent.mkdir()
    mb = expected.nbytes / MB

    rss: list[float] = []  # the daemon's peak (MiB) after a fresh --read-only imread

    def on_mount(store: Path, read: Callable[[Path], float], *options: str) -> float:
        m = ctx.mount(store, ctx.work / "mnt", *options)
        try:
            took = read(m.where)
            if read is imread_ro:
                rss.append(proc_field(m.pid, "VmHWM") / 1024)
            return took
        finally:
            ctx.unmount(m)

    def imread_ro(root: Path) -> float:
        return imread(root / "image.ome.tif", expected)

    readers: dict[str, Callable[[Path, np.ndarray], float]] = {
        "imread": imread, "cp": into_tmpfs("cp"),
        "gdal_translate": into_tmpfs("gdal_translate", "-q")}

    def cached(read: Callable[[Path, np.ndarray], float]) -> Callable[[Path], float]:
        def after_cat(root: Path) -> float:
            run(["cat", root / "image.ome.tif"], stdout=subprocess.DEVNULL)  # all cached
            return read(root / "image.ome.tif", expected)
        return after_cat

    def copy_for_ceiling(root: Path) -> float:
        shutil.copyfile(root / "image.ome.tif", local)  # the ceiling's file (untimed)
        return 0.0

    def ceiling(read: Callable[[Path, np.ndarray], float]) -> float:
        m = CEILING.mount(ctx, local.parent, ctx.work / "mnt")
        try:
            return read(m.where / local.name, expected)
        finally:
            ctx.unmount(m)

    def slide_header(root: Path) -> float:
        took = header(root / "slide.ome.tif", slide_side)
        stats = json.loads(run([*ZARRFUSE, "stats", "--json", root],
                               stdout=subprocess.PIPE).stdout)
        if stats["counters"].get("decoded", {}).get("chunks", 0):
            raise RuntimeError("reading the header decoded chunks")
        with open(root / "slide.ome.tif", "rb") as f, open(ctx.work / "slide.tif", "wb") as out:
            out.write(f.read(2 << 20))
            out.truncate((root / "slide.ome.tif").stat().st_size)
        return took

    tiff, ro = ("--format", "ome-tiff"), ("--format", "ome-tiff", "--read-only")
    on_mount(image, copy_for_ceiling, *ro)
    got = ctx.interleave({
        "one zstd thread": lambda: seconds(lambda: [codec.decode(c) for c in chunks]),
        "zarr-python": lambda: seconds(lambda: zarr.open_array(image, mode="r")[...]),
        "imread --read-only": lambda: on_mount(image, imread_ro, *ro),
        "imread default": lambda: on_mount(image, lambda r: imread(
            r / "image.ome.tif", expected), *tiff),
        **{f"{k} --read-only": lambda f=f: on_mount(
            image, lambda r: f(r / "image.ome.tif", expected), *ro)
           for k, f in readers.items() if k != "imread"},
        **{f"{k}, page cache": lambda f=f: on_mount(image, cached(f), *ro)
           for k, f in readers.items()},
        **{f"{k}, pyfuse3 ceiling": lambda f=f: ceiling(f) for k, f in readers.items()},
        "tiles": lambda: on_mount(image, lambda r: tiles(r / "image.ome.tif",
                                                         expected.nbytes), *tiff),
        "1 MiB reads": lambda: on_mount(image, lambda r: tiles(r / "image.ome.tif",
                                                               expected.nbytes, 1 << 20), *tiff),
        "tiff files": lambda: on_mount(image, lambda r: files(r, ".tiff"), "--format", "tiff"),
        "raw files": lambda: on_mount(image, lambda r: files(r / "c", "")),
        "first tile --read-only": lambda: on_mount(
            slide, lambda r: first_tile(r / "slide.ome.tif"), *ro),
        "first tile default": lambda: on_mount(slide, lambda r: first_tile(
            r / "slide.ome.tif"), *tiff),
        "header": lambda: on_mount(slide, slide_header, *tiff),
    })
    got["imread, local copy"] = [imread(local, expected) for _ in range(ctx.rounds)]
    got["header, local file"] = [header(ctx.work / "slide.tif", slide_side)
                                 for _ in range(ctx.rounds)]
    pace = {k: [mb / s for s in v] for k, v in got.items()}
    zstd, cache = ("one zstd thread", pace["one zstd thread"]), ("page cache",
                                                                 pace["imread, page cache"])
    name = f"{side} x {side} uint16 zstd"
    rows = [Row(f"imread, fresh mount, {o}, {name}", "MB/s", pace[f"imread {o}"], zstd, cache,
                at_least(1.0)) for o in ("--read-only", "default")]
    for k in readers:  # issue 55: each reader beside zarr-python and its page-cache self
        bound = ("pyfuse3 ceiling", pace[f"{k}, pyfuse3 ceiling"])
        rows.append(Row(f"{k}, fresh mount, --read-only, {name}", "MB/s",
                        pace[f"{k} --read-only"],
                        ("zarr-python in process", pace["zarr-python"]), bound, at_least(1.5),
                        "55"))
        rows.append(Row(f"{k}, fresh mount, --read-only, {name}", "MB/s",
                        pace[f"{k} --read-only"], (f"{k}, page cache", pace[f"{k}, page cache"]),
                        bound, at_least(0.8), "55"))
    rows += [Row(f"imread, {k}", "MB/s", pace[f"imread, {k}"], zstd)
             for k in ("page cache", "local copy")]
    rows.append(Row("the daemon's RSS peak after a fresh --read-only imread", "MiB", rss,
                    issue="55"))
    for key, label, floor in (("tiles", "every tile, one pread each", at_least(0.5)),
                              ("1 MiB reads", "the tile data in 1 MiB reads", at_least(0.5)),
                              ("tiff files", "every file of --format tiff", at_least(0.5)),
                              ("raw files", "every raw chunk file (no decoding)", None)):
        rows.append(Row(f"{label}, fresh mount", "MB/s", pace[key], zstd, None, floor, "14"))
    ms = {k: [s * 1000 for s in got[k]] for k in got}
    rows += [Row(f"header + first tile of {slide_side:,}^2, fresh mount, {o}", "ms",
                 ms[f"first tile {o}"], floor=at_most(50, absolute=True))
             for o in ("--read-only", "default")]
    rows.append(Row(f"header and every tile offset of {slide_side:,}^2, fresh mount", "ms",
                    ms["header"], ("same header, local file", ms["header, local file"]),
                    floor=at_most(1000, absolute=True), issue="14"))
    return rows
