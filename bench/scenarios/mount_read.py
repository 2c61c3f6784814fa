"""Sequential reads and read amplification (the read benchmark): (1) every chunk file of a
group of uncompressed arrays (about 1 GiB in files of 1 to 16 MiB; ``--quick``: 60 MiB) read
one after another through ``zarrfuse --read-only`` and bindfs, each file's mount pages
dropped just before it is read (``posix_fadvise(DONTNEED)``, checked with ``mincore``, the
store's pages warm); (2) the same with every cache warm; baselines bindfs and the store
read directly. Floors: cold >= 0.8x bindfs, warm >= 0.5x direct. (3) The first 64 KiB of
each of 200 shards of 16 MiB (``--quick``: 20 of 1 MiB): the bytes the daemon read from the
store (``rchar``) beside those delivered; floor: at most twice the delivered bytes plus the
kernel's read-ahead window per file."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import zarr

from bench.data import store_key, view_key
from bench.harness import MB, Context, KiB, MiB, Mount, Row, at_least, at_most, proc_field, read_all

ISSUE = "read"
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident(path: str) -> int:
    """Pages of ``path`` in the cache of the filesystem it is opened through (mincore of a
    shared read-only mapping: maps no page in)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vec = (ctypes.c_ubyte * -(-size // os.sysconf("SC_PAGE_SIZE")))()
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return sum(b & 1 for b in bytes(vec))
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def read_cold(paths: list[str]) -> float:
    """MB/s, each file's pages dropped just before it is read (dropping a whole pass up
    front let the VM hand the freed pages to its host: later first touches fault there)."""
    total, took = 0, 0.0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        if resident(path):
            raise RuntimeError(f"{path}: still cached after posix_fadvise(DONTNEED)")
        n, s = read_all([path])
        total, took = total + n, took + s
    return total / took / MB


def make_seq(root: Path, quick: bool) -> tuple[list[str], list[str], int]:
    """(store keys, view paths, bytes) of a group of uncompressed uint8 arrays."""
    arrays = ((("s01", 1024, (4, 4)), ("s03", 1800, (3, 2)), ("s16", 4096, (2, 1))) if quick
              else (("s01", 1024, (16, 6)), ("s02", 1536, (12, 4)), ("s04", 2000, (10, 4)),
                    ("s06", 2500, (7, 4)), ("s09", 3000, (6, 4)), ("s16", 4096, (19, 1))))
    group, rng = zarr.open_group(root, mode="w"), np.random.default_rng(12345)
    keys, views, total = [], [], 0
    for name, c, (gi, gj) in arrays:
        arr = group.create_array(name, shape=(c * gi, c * gj), chunks=(c, c), dtype="u1",
                                 compressors=None, fill_value=0)
        for i in range(gi):
            arr[i * c : (i + 1) * c, :] = np.frombuffer(rng.bytes(c * c * gj), "u1").reshape(
                c, c * gj)
            keys += [f"{name}/{store_key((i, j))}" for j in range(gj)]
            views += [f"{name}/{view_key((i, j))}" for j in range(gj)]
            total += c * c * gj
    return keys, views, total


def measure(ctx: Context) -> list[Row]:
    seq = ctx.work / "seq.zarr"
    keys, views, total = make_seq(seq, ctx.quick)
    read_all([seq / k for k in keys])  # the store's pages warm
    bf = ctx.foreground(["bindfs", "-f", "--no-allow-other", seq, ctx.work / "bindfs"],
                        ctx.work / "bindfs")
    zf = ctx.mount(seq, ctx.work / "zarrfuse", "--read-only")
    paths = {"direct": [str(seq / k) for k in keys],
             "bindfs": [str(bf.where / k) for k in keys],
             "zarrfuse": [str(zf.where / v) for v in views]}
    for i in (0, len(keys) - 1):
        if len({Path(p[i]).read_bytes() for p in paths.values()}) != 1:
            raise RuntimeError(f"{keys[i]} differs between the views")
    for name in ("bindfs", "zarrfuse"):  # untimed: the VM's first touches fault on the host
        read_cold(paths[name])

    def cold(name: str, m: Mount | None) -> float:
        before = proc_field(m.pid, "rchar", "io") if m else 0
        pace = read_cold(paths[name]) if m else total / read_all(paths[name])[1] / MB
        if m and proc_field(m.pid, "rchar", "io") - before < total:
            raise RuntimeError(f"{name}: the daemon read less than the data: not cold")
        return pace

    mounts = {"direct": None, "bindfs": bf, "zarrfuse": zf}
    c = ctx.interleave({k: lambda k=k: cold(k, mounts[k]) for k in paths})
    w = ctx.interleave({k: lambda k=k: total / read_all(paths[k])[1] / MB for k in paths})
    ctx.unmount(bf)
    ctx.unmount(zf)
    label = f"{len(keys)} chunk files, {total / MiB:.0f} MiB"
    rows = [Row(f"sequential read, mount cache cold, {label}", "MB/s", c["zarrfuse"],
                ("bindfs", c["bindfs"]), floor=at_least(0.8)),
            Row(f"sequential read, mount cache cold, {label}", "MB/s", c["zarrfuse"],
                ("direct, store warm", c["direct"])),
            Row(f"sequential read again, warm, {label}", "MB/s", w["zarrfuse"],
                ("direct", w["direct"]), floor=at_least(0.5)),
            Row(f"sequential read again, warm, {label}", "MB/s", w["zarrfuse"],
                ("bindfs", w["bindfs"]))]
    return rows + heads(ctx)


def heads(ctx: Context) -> list[Row]:
    n, side = ctx.pick(200, 20), ctx.pick(4096, 1024)
    root = ctx.work / "shards.zarr"
    arr = zarr.create_array(root, shape=(side * n, side), shards=(side, side),
                            chunks=(side // 8, side // 8), dtype="u1", compressors=None,
                            fill_value=0)
    arr[:side, :] = np.frombuffer(np.random.default_rng(1).bytes(side * side), "u1").reshape(
        side, side)
    for i in range(1, n):  # the same bytes under every key, no extra disk
        (root / "c" / str(i)).mkdir(parents=True)
        os.link(root / store_key((0, 0)), root / store_key((i, 0)))
    delivered = n * 64 * KiB

    def fetched(kind: str) -> tuple[float, float]:
        if kind == "bindfs":
            m = ctx.foreground(["bindfs", "-f", "--no-allow-other", root, ctx.work / "b"],
                               ctx.work / "b")
            paths = [m.where / store_key((i, 0)) for i in range(n)]
        else:
            m = ctx.mount(root, ctx.work / "z", "--read-only")
            paths = [m.where / view_key((i, 0)) for i in range(n)]
        try:
            before = proc_field(m.pid, "rchar", "io")
            for p in paths:
                with open(p, "rb", buffering=0) as f:
                    f.read(64 * KiB)
            allowance = 2 * delivered + n * m.read_ahead_kb * KiB
            return (proc_field(m.pid, "rchar", "io") - before) / MiB, allowance / MiB
        finally:
            ctx.unmount(m)

    got = ctx.interleave({k: lambda k=k: fetched(k) for k in ("bindfs", "zarrfuse")})
    limit = Row.median([a for _, a in got["zarrfuse"]]) or 0.0
    zarrfuse = [f for f, _ in got["zarrfuse"]]
    return [Row(f"first 64 KiB of {n} shards of {side * side / MiB:g} MiB: MiB the daemon "
                "read", "MiB", zarrfuse, ("allowance: 2x delivered + a read-ahead window per "
                                          "file", [limit]), floor=at_most(1.0)),
            Row(f"first 64 KiB of {n} shards: MiB the daemon read", "MiB", zarrfuse,
                ("bindfs", [f for f, _ in got["bindfs"]]))]
