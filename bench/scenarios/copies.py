"""``cp -r`` of 64 chunk files of 1 MiB into tmpfs (issue 35 point 4; ``--quick``: 16), on
a fresh mount with dropped caches (cold), then again on the same mount, through bindfs (the
baseline), the pyfuse3 ceiling (the bound) and zarrfuse raw ``--read-only`` and default.
Figures are paces (MB/s; the copy checked by size). Floor: cold >= 0.9x bindfs's pace."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.data import make_files
from bench.harness import MB, Context, MiB, Row, at_least, drop_caches, run, seconds
from bench.scenarios.fuse_peers import BINDFS, CEILING, RAW, RAW_RO, Peer

ISSUE = "35"


def copy_once(source: Path, n: int) -> float:
    """MB/s of ``cp -r`` of ``source`` into tmpfs, checked by size; the copy removed."""
    target = Path(tempfile.mkdtemp(prefix="zarrfuse-cp-", dir="/dev/shm"))
    try:
        took = seconds(lambda: run(["cp", "-r", source, target / "c"]))
        copied = sum(p.stat().st_size for p in (target / "c").rglob("*") if p.is_file())
        if copied != n * MiB:
            raise RuntimeError(f"cp -r of {source} copied {copied} bytes, {n * MiB} stored")
        return n * MiB / took / MB
    finally:
        shutil.rmtree(target, ignore_errors=True)


def copies(ctx: Context, peer: Peer, n: int) -> tuple[float, float]:
    m = peer.mount(ctx, ctx.work / "copies.zarr", ctx.work / "mnt" / peer.name.replace(" ", "_"))
    try:
        drop_caches()
        return copy_once(m.where / "c", n), copy_once(m.where / "c", n)
    finally:
        ctx.unmount(m)


def measure(ctx: Context) -> list[Row]:
    n = ctx.pick(64, 16)
    make_files(ctx.work / "copies.zarr", n, MiB)
    run(["sync"])
    peers = (BINDFS, CEILING, RAW_RO, RAW)
    got = ctx.interleave({p.name: lambda p=p: copies(ctx, p, n) for p in peers})
    rows = []
    for i, label in enumerate(("cold", "again, same mount")):
        for p in (RAW_RO, RAW):
            rows.append(Row(f"cp -r of {n} files of 1 MiB, {label}, {p.name}", "MB/s",
                            [r[i] for r in got[p.name]],
                            ("bindfs", [r[i] for r in got["bindfs"]]),
                            ("ceiling", [r[i] for r in got["ceiling"]]),
                            at_least(0.9) if i == 0 else None))
    return rows
