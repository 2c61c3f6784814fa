"""Writes (issues 4 and 15): one ``cp`` of 256 files of 1 MiB (``--quick``: 32) into a
fresh store's chunk directory through a writable zarrfuse mount (each file committed at
close), beside the same ``cp`` straight into a store directory (floor: >= 0.5x its pace),
into a ``--no-verify`` mount (floor: the default check >= 0.8x), into bindfs and into
``bench/null_pyfuse3.py`` (a pyfuse3 filesystem that drops every byte: the bound of any
pyfuse3 daemon before it stores anything). Also the daemon's requests per copied file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import zarr

from bench.harness import HERE, MB, ZARRFUSE, Context, MiB, Row, at_least, run, seconds

ISSUE = "4"


def measure(ctx: Context) -> list[Row]:
    n = ctx.pick(256, 32)
    view, store = ctx.work / "src-view", ctx.work / "src-store"
    view.mkdir()
    store.mkdir()
    for i in range(n):
        data = os.urandom(MiB)
        (view / f"{i:03d}").write_bytes(data)
        (store / str(i)).write_bytes(data)
    fresh = iter(range(10**6))
    profile: list[str] = []

    def array() -> Path:
        root = ctx.work / f"arr{next(fresh)}"
        zarr.create_array(root, shape=(1, n * MiB), chunks=(1, MiB), dtype="u1",
                          compressors=None, fill_value=0)
        (root / "c" / "0").mkdir(parents=True)
        return root

    def cp(sources: Path, target: Path) -> float:
        """MB/s of one ``cp`` of every file, started from memory the host has just backed
        (this VM hands freed pages back and faults them in again at several times the
        copy's cost, whichever side ran after a free)."""
        names = sorted(p.name for p in sources.iterdir())
        run(["sync"])
        block = bytearray(b"\x01") * (3 * n * MiB)
        del block
        return n * MiB / seconds(lambda: run(["cp", *names, target], 600.0,
                                             cwd=sources)) / MB

    def mounted(*flags: str) -> float:
        root = array()
        m = ctx.mount(root, ctx.work / "mnt", *flags)
        try:
            pace = cp(view, m.where / "c/0/000/0")
            counters = json.loads(run([*ZARRFUSE, "stats", "--json", m.where],
                                      stdout=subprocess.PIPE).stdout)["counters"]
            counts, spent = counters["requests"], counters.get("request_seconds", {})
            profile[:] = [f"{k} {counts[k] / n:.1f}x{1000 * spent.get(k, 0) / counts[k]:.2f} ms"
                          for k in sorted(counts, key=lambda k: -spent.get(k, 0))][:4]
        finally:
            ctx.unmount(m)
        if (root / "c/0" / str(n - 1)).read_bytes() != (store / str(n - 1)).read_bytes():
            raise RuntimeError("the stored bytes differ")
        return pace

    def daemon(kind: str) -> float:
        where = ctx.work / f"{kind}{next(fresh)}"
        argv = (["bindfs", "-f", array() / "c" / "0", where] if kind == "bindfs"
                else [sys.executable, HERE / "null_pyfuse3.py", where])
        m = ctx.foreground(argv, where)
        try:
            return cp(store, m.where)
        finally:
            ctx.unmount(m)

    got = ctx.interleave({"direct": lambda: cp(store, array() / "c" / "0"),
                          "zarrfuse": mounted, "--no-verify": lambda: mounted("--no-verify"),
                          "bindfs": lambda: daemon("bindfs"),
                          "null pyfuse3": lambda: daemon("null")})
    label = f"cp of {n} files of 1 MiB into a writable mount"
    return [Row(label, "MB/s", got["zarrfuse"], ("cp into the store directory", got["direct"]),
                ("a pyfuse3 daemon dropping every byte", got["null pyfuse3"]),
                at_least(0.5)),
            Row(label, "MB/s", got["zarrfuse"], ("--no-verify mount", got["--no-verify"]),
                floor=at_least(0.8), issue="15"),
            Row(f"{label} (daemon per file, last round: {'; '.join(profile)})", "MB/s",
                got["zarrfuse"], ("bindfs", got["bindfs"]))]
