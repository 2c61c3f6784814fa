"""The colour composite (issue 54): a 3-channel uint16 OME-Zarr 0.5 image of 100,000 x 100,000
(``--quick``: 10,000 x 10,000), zstd chunks of 1 x 256 x 256, ``omero`` colours and windows, a
pyramid down to under 512 px; the first row of chunks of every level is stored, the rest is
the fill value.

1. The first composite tile on a fresh ``--format ome-tiff`` mount: the header read by
   tifffile (not timed), then one ``pread`` of tile 0 (3 chunks decoded and composed).
   Floor: < 100 ms. Beside it the same read of the OME-TIFF's first tile (1 chunk).
2. The composite's MB/s: 32 MiB of tile bytes from tile 0 on, 1 MiB reads in file order,
   beside the same read of the OME-TIFF, each on a fresh mount. Floor: >= 0.5x (a composite
   pixel's 3 bytes need 6 bytes of channels decoded: equal decoding speed gives 0.5x). Its
   bound: the same read with the colouring left out (``bench/uncoloured.py``), what the
   composite would read at if colouring cost nothing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

from bench.harness import HERE, MB, Context, Row, at_least, at_most, seconds

ISSUE = "54"
CHUNK, CHANNELS, READ, SPAN = 256, 3, 1 << 20, 32 << 20
FILES = ("cells.composite.tif", "cells.ome.tif")
UNCOLOURED = "uncoloured composite"


def make_image(root: Path, side: int) -> None:
    """The pyramid, level by level, each with its first row of chunks stored."""
    rng = np.random.default_rng(1)
    datasets, level = [], 0
    while True:
        array = zarr.create_array(root / str(level), shape=(CHANNELS, side, side),
                                  chunks=(1, CHUNK, CHUNK), dtype="u2", fill_value=0,
                                  compressors=ZstdCodec(level=3))
        rows, x = min(CHUNK, side), np.arange(side, dtype=np.float64)
        array[:, :rows, :] = np.stack([
            np.sin(x / (40 + 30 * c))[None, :] * 8000 + 10000
            + rng.integers(0, 2000, (rows, side)) for c in range(CHANNELS)]).astype("u2")
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 2.0**level, 2.0**level]}]})
        if side <= 512:
            break
        side, level = -(-side // 2), level + 1
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
            {"name": "x", "type": "space"}]
    channels = [{"label": n, "color": c, "active": True,
                 "window": {"min": 0, "max": 65535, "start": 2000, "end": 20000}}
                for n, c in (("DAPI", "0000FF"), ("GFP", "00FF00"), ("mCherry", "FF00FF"))]
    zarr.open_group(root, mode="r+", zarr_format=3).attrs.update({"ome": {
        "version": "0.5", "multiscales": [{"axes": axes, "datasets": datasets}],
        "omero": {"channels": channels}}})


def measure(ctx: Context) -> list[Row]:
    source = ctx.work / "cells.ome.zarr"
    zarr.open_group(source, mode="w", zarr_format=3)
    make_image(source, ctx.pick(100_000, 10_000))
    span = ctx.pick(SPAN, 8 * READ)

    def on_a_fresh_mount(name: str, first_tile_only: bool, uncoloured: bool = False) -> float:
        where, options = ctx.work / "mnt", ("--format", "ome-tiff")
        m = ctx.foreground([sys.executable, HERE / "uncoloured.py", "mount", source, where,
                            *options, "--foreground"], where) if uncoloured else (
            ctx.mount(source, where, *options))
        try:
            with tifffile.TiffFile(m.where / name) as tif:
                offset, nbytes = (int(tif.pages[0].dataoffsets[0]),
                                  int(tif.pages[0].databytecounts[0]))
            fd = os.open(m.where / name, os.O_RDONLY)
            try:
                if first_tile_only:
                    return seconds(lambda: os.pread(fd, nbytes, offset)) * 1e3
                took = seconds(lambda: [os.pread(fd, READ, at)
                                        for at in range(offset, offset + span, READ)])
                return span / took / MB
            finally:
                os.close(fd)
        finally:
            ctx.unmount(m)

    tiles = ctx.interleave({name: lambda n=name: on_a_fresh_mount(n, True) for name in FILES})
    rates = ctx.interleave({
        **{name: lambda n=name: on_a_fresh_mount(n, False) for name in FILES},
        UNCOLOURED: lambda: on_a_fresh_mount(FILES[0], False, uncoloured=True)})
    composite, ome = FILES
    return [
        Row("first composite tile, fresh mount", "ms", tiles[composite],
            ("the OME-TIFF's first tile", tiles[ome]), floor=at_most(100, absolute=True)),
        Row("composite read, 1 MiB reads in file order", "MB/s", rates[composite],
            ("the OME-TIFF on the same image", rates[ome]),
            bound=("the composite with no colouring", rates[UNCOLOURED]), floor=at_least(0.5)),
    ]
