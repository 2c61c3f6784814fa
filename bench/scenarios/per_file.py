"""Many small chunk files read one by one (issue 35 point 1, issue 55 point 2): where a FUSE
round trip per open, read and close shows, not bandwidth.

One array of 2000 chunks of 64 KiB (uncompressed random bytes; ``--quick``: 200), read in
every round through bindfs (the baseline), the pyfuse3 ceiling, the ceiling answering FLUSH
and zarrfuse raw and TIFF, ``--read-only`` and default, each on a fresh mount: list the
files (untimed, names checked), drop the caches, read every file (cold), again (second
pass), drop the caches and read once more on the same mount (cold again: names and open
chunks kept, no page). Floors: cold <= 1.5x bindfs, second pass <= 1.2x (issue 35); cold
<= 1.2x the ceiling, a writable mount's second pass <= 1.2x the ceiling answering FLUSH
(issue 55). Bound: the ceiling (answering FLUSH, for a writable mount). Also the second
pass's cost per file, split into open, read and close."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.data import make_files, store_key, view_key
from bench.harness import Context, KiB, Row, at_most, drop_caches, run
from bench.scenarios.fuse_peers import (
    BINDFS,
    CEILING,
    FLUSHED,
    RAW,
    RAW_RO,
    ZARRFUSE,
    Peer,
    bound_of,
)

ISSUE = "35"
CHUNK = 64 * KiB
PHASES = ("cold", "second pass", "cold again, same mount")


@dataclass
class Pass:
    seconds: float
    nbytes: int
    open_s: float  # each call's time, summed over the files
    read_s: float
    close_s: float


def read_timed(paths: Sequence[str]) -> Pass:
    clock, bufs = time.perf_counter, [bytearray(1 << 20)]
    total, open_s, read_s, close_s = 0, 0.0, 0.0, 0.0
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


def passes(ctx: Context, peer: Peer, n: int) -> list[Pass]:
    """A fresh mount's three passes over every chunk file, checked."""
    store = ctx.work / "store.zarr"
    m = peer.mount(ctx, store, ctx.work / "mnt" / peer.name.replace(" ", "_"))
    try:
        want = [(view_key((i,)) + peer.suffix) if peer.kind == "zarrfuse"
                else store_key((i,)) for i in range(n)]
        seen = {os.path.relpath(os.path.join(d, f), m.where)
                for d, _, files in os.walk(m.where / "c") for f in files}
        if seen != set(want):
            raise RuntimeError(f"{len(seen)} chunk files listed, {n} expected")
        paths = [str(m.where / p) for p in want]
        drop_caches()
        got = []
        for phase in PHASES:
            if phase.startswith("cold again"):
                drop_caches()
            got.append(read_timed(paths))
            if got[-1].nbytes < n * CHUNK or (not peer.suffix and got[-1].nbytes != n * CHUNK):
                raise RuntimeError(f"{phase}: read {got[-1].nbytes} bytes of {n * CHUNK}")
        if not peer.suffix:  # a raw view shows the stored bytes: spot-check two files
            for i in (0, n - 1):
                if Path(paths[i]).read_bytes() != (store / store_key((i,))).read_bytes():
                    raise RuntimeError(f"{paths[i]} differs from the store")
        return got
    finally:
        ctx.unmount(m)


def measure(ctx: Context) -> list[Row]:
    n = ctx.pick(2000, 200)
    make_files(ctx.work / "store.zarr", n, CHUNK, seed=35)
    run(["sync"])
    peers = (BINDFS, CEILING, FLUSHED, *ZARRFUSE)
    got = ctx.interleave({p.name: lambda p=p: passes(ctx, p, n) for p in peers})

    def s(peer: Peer, phase: int) -> list[float]:
        return [r[phase].seconds for r in got[peer.name]]

    rows = []
    for i, phase in enumerate(PHASES):
        floor = at_most(1.2 if phase == "second pass" else 1.5)
        for peer in ZARRFUSE:
            rows.append(Row(f"{phase}, {n} files of 64 KiB, {peer.name}", "s", s(peer, i),
                            ("bindfs", s(BINDFS, i)),
                            (bound_of(peer).name, s(bound_of(peer), i)), floor))
        rows.append(Row(f"{phase}, the ceiling answering FLUSH (no zarrfuse)", "s",
                        s(FLUSHED, i), ("bindfs", s(BINDFS, i))))
    for peer, phase in ((RAW_RO, 0), (RAW, 1)):  # issue 55's rows: against the bound itself
        rows.append(Row(f"{PHASES[phase]}, {n} files of 64 KiB, {peer.name}", "s",
                        s(peer, phase), (bound_of(peer).name, s(bound_of(peer), phase)),
                        floor=at_most(1.2), issue="55"))
    for peer in (RAW_RO, RAW, BINDFS, CEILING, FLUSHED):
        second = [r[1] for r in got[peer.name]]
        parts = [Row.median([getattr(p, k) / n * 1000 for p in second]) or 0.0
                 for k in ("open_s", "read_s", "close_s")]
        rows.append(Row(f"second pass, a file's open + read + close ({parts[0]:.3f} + "
                        f"{parts[1]:.3f} + {parts[2]:.3f}), {peer.name}", "ms",
                        [(p.open_s + p.read_s + p.close_s) / n * 1000 for p in second]))
    return rows

