"""Following a local store (issue 31 point 5): zarr-python rewrites one chunk of a 4096 x
4096 uint16 image (``--quick``: 1024 x 1024) while a read-only ``--format ome-tiff`` mount
of it is open and its whole image was read; figure: the seconds until a read of the whole
image shows the new pixels (polled every 20 ms), beside unmounting, mounting again and
reading (what a user had to do before). And ``cp`` of 128 files of 1 MiB (``--quick``: 16)
into a writable mount, which hears of its own writes, beside a ``--no-watch`` mount."""

from __future__ import annotations

import time

import numpy as np
import tifffile
import zarr

from bench.harness import Context, Row, run, seconds

ISSUE = "31"
CHUNK = 512


def measure(ctx: Context) -> list[Row]:
    side, n = ctx.pick(4096, 1024), ctx.pick(128, 16)
    fresh = iter(range(10**6))

    def whole(path: object) -> np.ndarray:
        with tifffile.TiffFile(path) as tif:
            return tif.series[0].asarray()

    def image() -> object:
        store = ctx.work / f"img{next(fresh)}"
        data = np.random.default_rng(1).integers(0, 65535, (side, side), dtype="u2")
        zarr.create_array(store, data=data, chunks=(CHUNK, CHUNK))
        return store

    def watched() -> float:
        store = image()
        m = ctx.mount(store, ctx.work / "mnt", "--format", "ome-tiff")
        try:
            path = m.where / f"{store.name}.ome.tif"  # type: ignore[attr-defined]
            whole(path)
            zarr.open_array(store, mode="r+")[:CHUNK, :CHUNK] = 7
            start = time.perf_counter()
            while whole(path)[0, 0] != 7:
                if time.perf_counter() - start > 30:
                    raise RuntimeError("the change did not show within 30 s")
                time.sleep(0.02)
            return time.perf_counter() - start
        finally:
            ctx.unmount(m)

    def remount() -> float:
        store = image()
        opts = ("--format", "ome-tiff", "--no-watch")
        m = ctx.mount(store, ctx.work / "mnt", *opts)
        whole(m.where / f"{store.name}.ome.tif")  # type: ignore[attr-defined]
        zarr.open_array(store, mode="r+")[:CHUNK, :CHUNK] = 7
        start = time.perf_counter()
        ctx.unmount(m)
        m = ctx.mount(store, ctx.work / "mnt", *opts)
        try:
            if whole(m.where / f"{store.name}.ome.tif")[0, 0] != 7:  # type: ignore[attr-defined]
                raise RuntimeError("the remount shows the old pixels")
            return time.perf_counter() - start
        finally:
            ctx.unmount(m)

    sources = ctx.work / "src"
    sources.mkdir()
    for i in range(n):
        (sources / f"{i:03d}").write_bytes(np.full(1 << 20, i % 250 + 1, "u1").tobytes())

    def copy(*flags: str) -> float:
        store = ctx.work / f"arr{next(fresh)}"
        zarr.create_array(store, shape=(1, n << 20), chunks=(1, 1 << 20), dtype="u1",
                          compressors=None, fill_value=0)
        m = ctx.mount(store, ctx.work / "mnt", *flags)
        try:
            return seconds(lambda: run(["cp", *sorted(sources.iterdir()), m.where / "c/0/000/0"]))
        finally:
            ctx.unmount(m)

    got = ctx.interleave({"watched": watched, "remount": remount, "cp": copy,
                          "cp --no-watch": lambda: copy("--no-watch")})
    return [Row(f"a change shown in a read-only whole-image mount, {side}^2", "s",
                got["watched"], ("unmount, mount again and read", got["remount"])),
            Row(f"cp of {n} files of 1 MiB into a writable mount", "s", got["cp"],
                ("--no-watch mount", got["cp --no-watch"]))]
