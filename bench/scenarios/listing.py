"""``find -type f`` and ``ls -lR`` of 100,000 chunk files (issue 35 point 5, issue 55 point
2): an array of one-byte chunks (a fanout tree of 100 directories of 1000 files; in the
store one directory of 100,000 keys; ``--quick``: 2000), each listing on a fresh mount with
dropped caches, through bindfs (the baseline), the pyfuse3 ceiling (the bound) and zarrfuse
raw ``--read-only`` and default. Floors: <= 1.5x bindfs (issue 35), ``find`` <= 1.2x the
ceiling (issue 55). The read benchmark's floors: ``ls -lR`` <= 0.5x bindfs and <= 10x the
store directory itself, warm."""

from __future__ import annotations

import subprocess

import zarr
from zarr.codecs import BytesCodec

from bench.harness import Context, Row, at_most, drop_caches, run, seconds, timed
from bench.scenarios.fuse_peers import BINDFS, CEILING, RAW, RAW_RO, Peer

ISSUE = "35"
LISTINGS = {"find -type f": ["find", "-type", "f"], "ls -lR": ["ls", "-lR"]}


def listing(ctx: Context, peer: Peer, argv: list[str], n: int) -> float:
    m = peer.mount(ctx, ctx.work / "tree.zarr", ctx.work / "mnt" / peer.name.replace(" ", "_"))
    try:
        drop_caches()
        out: list[bytes] = []
        took = seconds(lambda: out.append(run(
            [argv[0], m.where, *argv[1:]], 600.0, stdout=subprocess.PIPE).stdout))
        files = out[0].count(b"\n")
        if argv[0] == "find" and files < n:
            raise RuntimeError(f"find saw {files} files, {n} chunks stored")
        return took
    finally:
        ctx.unmount(m)


def measure(ctx: Context) -> list[Row]:
    n = ctx.pick(100_000, 2000)
    tree = ctx.work / "tree.zarr"
    arr = zarr.create_array(tree, shape=(n,), chunks=(1,), dtype="u1", compressors=None,
                            serializer=BytesCodec(), fill_value=0)
    for i in range(0, n, 10_000):
        arr[i : i + 10_000] = 7
    run(["sync"])
    peers = (BINDFS, CEILING, RAW_RO, RAW)
    got = ctx.interleave({f"{label}, {p.name}": lambda p=p, argv=argv: listing(ctx, p, argv, n)
                          for label, argv in LISTINGS.items() for p in peers})
    timed(["ls", "-lR", tree])  # the store's own, warm
    direct = ctx.interleave({"ls -lR of the store": lambda: timed(["ls", "-lR", tree])})
    rows = []
    for label in LISTINGS:
        for p in (RAW_RO, RAW):
            rows.append(Row(f"{label} of {n} chunk files, fresh mount, {p.name}", "s",
                            got[f"{label}, {p.name}"], ("bindfs", got[f"{label}, bindfs"]),
                            ("ceiling", got[f"{label}, ceiling"]), at_most(1.5)))
    for p in (RAW_RO, RAW):
        rows.append(Row(f"find -type f of {n} chunk files, fresh mount, {p.name}", "s",
                        got[f"find -type f, {p.name}"], ("ceiling", got["find -type f, ceiling"]),
                        floor=at_most(1.2), issue="55"))
    rows.append(Row(f"ls -lR of {n} chunk files, fresh mount, raw --read-only", "s",
                    got["ls -lR, raw --read-only"], ("bindfs", got["ls -lR, bindfs"]),
                    floor=at_most(0.5), issue="read"))
    rows.append(Row(f"ls -lR of {n} chunk files, fresh mount, raw --read-only", "s",
                    got["ls -lR, raw --read-only"], ("store directory, warm",
                                                     direct["ls -lR of the store"]),
                    floor=at_most(10), issue="read"))
    return rows
