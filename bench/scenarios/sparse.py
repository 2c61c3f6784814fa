"""Browsing costs what is stored, not what the grid allows (the sparse benchmark): ``find``
over a fresh read-only mount of a 10**6 x 10**6 grid of one-byte chunks holding 1000 at
random (``--quick``: 100), and ``ls -lR`` of a dense 200 x 250 array (``--quick``: 20 x
25), each beside the same command on the store directory (the baseline)."""

from __future__ import annotations

import numpy as np
import zarr

from bench.harness import Context, Row, timed

ISSUE = "sparse"


def measure(ctx: Context) -> list[Row]:
    stored, dense = ctx.pick(1000, 100), ctx.pick((200, 250), (20, 25))
    sparse = zarr.create_array(ctx.work / "sparse", shape=(10**6, 10**6), chunks=(1, 1),
                               dtype="u1", fill_value=0, compressors=None)
    for i, j in np.random.default_rng(15).integers(0, 10**6, size=(stored, 2)):
        sparse[int(i), int(j)] = 1  # one write a point: vindex sizes a table by the grid
    zarr.create_array(ctx.work / "dense", shape=dense, chunks=(1, 1), dtype="u1",
                      fill_value=0, compressors=None)[...] = 1

    def on_mount(store: str, cmd: str) -> float:
        m = ctx.mount(ctx.work / store, ctx.work / "mnt", "--read-only")
        try:
            return timed([*cmd.split(), m.where], 120.0)
        finally:
            ctx.unmount(m)

    got = ctx.interleave({
        "find mount": lambda: on_mount("sparse", "find"),
        "find store": lambda: timed(["find", ctx.work / "sparse"], 120.0),
        "ls mount": lambda: on_mount("dense", "ls -lR"),
        "ls store": lambda: timed(["ls", "-lR", ctx.work / "dense"], 120.0)})
    return [Row(f"find, 10**12-chunk grid, {stored} stored, fresh mount", "s",
                got["find mount"], ("store directory", got["find store"])),
            Row(f"ls -lR, dense {dense[0]} x {dense[1]} grid, fresh mount", "s",
                got["ls mount"], ("store directory", got["ls store"]))]
