"""Saving tiles of a sharded array through a rendered view (issue 30): 16 tiles of 256 x
256 saved as TIFF files (open, write, close: the close commits) into a 4096 x 4096 uint16
zstd image in shards of 2048 x 2048 on a writable ``--format tiff`` mount, four in each
shard, beside zarr-python's own ``array[region] = tile`` on a copy of the store. No floor:
the figure says what a save costs. Every tile checked in the store afterwards."""

from __future__ import annotations

import io
import shutil

import numpy as np
import tifffile
import zarr

from bench.data import TILE, make_image
from bench.harness import Context, Row, seconds

ISSUE = "30"
TILES = [(row, col) for row in (0, 3, 8, 11) for col in (1, 6, 9, 14)]


def tile(i: int) -> np.ndarray:
    return np.full((TILE, TILE), 1000 + i, dtype="u2")


def measure(ctx: Context) -> list[Row]:
    image = ctx.work / "image.zarr"
    make_image(image, 4096, shards=2048)
    encoded = []
    for i in range(len(TILES)):
        out = io.BytesIO()
        tifffile.imwrite(out, tile(i), photometric="minisblack")
        encoded.append(out.getvalue())

    def copy(name: str) -> object:
        shutil.rmtree(ctx.work / name, ignore_errors=True)
        return shutil.copytree(image, ctx.work / name)

    def checked(store: object, took: float) -> float:
        array = zarr.open_array(store)
        for i, (r, c) in enumerate(TILES):
            if not np.array_equal(array[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE],
                                  tile(i)):
                raise RuntimeError(f"tile {(r, c)} was not stored")
        return took / len(TILES) * 1000

    def mount() -> float:
        store = copy("mount.zarr")
        m = ctx.mount(store, ctx.work / "mnt", "--format", "tiff")
        try:
            def save() -> None:
                for (r, c), data in zip(TILES, encoded, strict=True):
                    with open(m.where / "planes" / f"y{r:03d}" / f"y{r:03d}-x{c:03d}.tiff",
                              "r+b") as f:
                        f.write(data)
                        f.truncate(len(data))
            took = seconds(save)
        finally:
            ctx.unmount(m)
        return checked(store, took)

    def python() -> float:
        store = copy("zarr.zarr")
        array = zarr.open_array(store, mode="r+")

        def save() -> None:
            for i, (r, c) in enumerate(TILES):
                array[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE] = tile(i)
        return checked(store, seconds(save))

    got = ctx.interleave({"zarrfuse": mount, "zarr-python": python})
    return [Row("save a 256 x 256 tile of a 2048 x 2048 zstd shard, --format tiff", "ms",
                got["zarrfuse"], ("zarr-python, array[region] = tile", got["zarr-python"]))]
