"""Rendered views (issue 5): every ``.tiff`` file of a fresh ``--format tiff --read-only``
mount of a 4096 x 4096 uint16 image in 256 zstd chunks (``--quick``: 1024 x 1024), read in
directory order, beside decoding the same chunks with zarr and encoding them with tifffile
in this process (floor: >= 0.7x); and ``ls -l`` of a directory of 1000 rendered files beside
the same directory in the raw view, each on a fresh mount (floor: <= 2x)."""

from __future__ import annotations

import io

import tifffile
import zarr

from bench.data import TILE, make_image
from bench.harness import MB, Context, Row, at_least, at_most, seconds, timed

ISSUE = "5"


def measure(ctx: Context) -> list[Row]:
    side = ctx.pick(4096, 1024)
    make_image(ctx.work / "image.zarr", side)
    zarr.create_array(ctx.work / "wide.zarr", shape=(1, 64000), chunks=(1, 64), dtype="u2",
                      compressors=None)[...] = 1
    image = zarr.open_array(ctx.work / "image.zarr", mode="r")

    def in_process() -> float:
        total = 0

        def encode() -> None:
            nonlocal total
            for i in range(side // TILE):
                for j in range(side // TILE):
                    out = io.BytesIO()
                    tifffile.imwrite(out, image[i * TILE : (i + 1) * TILE,
                                                j * TILE : (j + 1) * TILE],
                                     photometric="minisblack")
                    total += len(out.getvalue())
        took = seconds(encode)
        return total / took / MB

    def mounted() -> float:
        m = ctx.mount(ctx.work / "image.zarr", ctx.work / "mnt", "--format", "tiff",
                      "--read-only")
        try:
            files = sorted(m.where.rglob("*.tiff"))
            total = 0

            def read() -> None:
                nonlocal total
                total = sum(len(f.read_bytes()) for f in files)
            took = seconds(read)
            return total / took / MB
        finally:
            ctx.unmount(m)

    def ls(*options: str) -> float:
        m = ctx.mount(ctx.work / "wide.zarr", ctx.work / "mnt", "--read-only", *options)
        try:
            return timed(["ls", "-l", m.where / ("planes" if options else "c/0/000/0")])
        finally:
            ctx.unmount(m)

    got = ctx.interleave({"in process": in_process, "mount": mounted,
                          "ls tiff": lambda: ls("--format", "tiff"), "ls raw": ls})
    return [Row(f"read every TIFF of {side}^2, fresh mount", "MB/s", got["mount"],
                ("zarr decode + tifffile encode, in process", got["in process"]),
                floor=at_least(0.7)),
            Row("ls -l of 1000 rendered files, fresh mount", "s", got["ls tiff"],
                ("raw view", got["ls raw"]), floor=at_most(2.0))]
