"""A second mount of a remote image on the same ``--cache-dir`` (issue 24 point 2; on a web
server 50 ms away, issue 32 point 3): a 4096 x 4096 uint16 image in 256 x 256 zstd chunks
(``--quick``: 1024 x 1024) on moto's S3 (``disk-cache-s3``) or nginx behind the delaying
proxy (``disk-cache-http``), and the same array in a local directory. Each pass a fresh
read-only mount with ``--metadata-ttl 3600`` reading every chunk file whole (1 MiB reads,
in directory order, a child process), then the whole image (``--format ome-tiff``): cold
cache, warm cache (a second mount), local (the baseline). Floors: warm >= 0.8x the local
mount's pace (S3) or within 1.5x its time (web server: 0.67x); the server sends the warm
mount < 10% of the cold mount's bytes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import zarr

from bench.harness import MB, Context, Row, at_least, at_most, run
from bench.remote import DelayProxy, NginxLog, s3_bucket

ISSUE = "24"
READ_ALL = """
import os, sys, time
paths, buf, total = sys.stdin.read().split("\\0")[:-1], bytearray(1 << 20), 0
start = time.perf_counter()
for path in paths:
    fd = os.open(path, os.O_RDONLY)
    try:
        while n := os.readv(fd, [buf]):
            total += n
    finally:
        os.close(fd)
print(total, time.perf_counter() - start)
"""


def read_all(root: Path, pattern: str) -> float:
    """MB/s of reading every file under ``root`` matching ``pattern``, in the order the
    directories list them (as ``cp -r`` goes), by a child process (as a user's tool)."""
    wanted = {str(p) for p in root.rglob(pattern) if p.is_file()}
    paths = [path for d, _, names in os.walk(root) for name in names
             if (path := os.path.join(d, name)) in wanted]
    out = run([sys.executable, "-c", READ_ALL], 600.0, input="\0".join(paths) + "\0",
              stdout=subprocess.PIPE, text=True).stdout.split()
    return int(out[0]) / float(out[1]) / MB


@contextlib.contextmanager
def remote(ctx: Context, store: str, data: np.ndarray
           ) -> Iterator[tuple[str, list[str], Callable[[], None], Callable[[], int]]]:
    """(the image's URL, mount options, a mark, body bytes the server sent since it)."""
    if store == "http":
        from tests.http_servers import nginx  # noqa: PLC0415  (the web server's scenario)

        zarr.create_array(ctx.work / "www" / "img", data=data, chunks=(256, 256))
        log = NginxLog(ctx.work / "nginx" / "access.log")
        with nginx(ctx.work / "www", ctx.work / "nginx") as url, \
                DelayProxy(int(url.rsplit(":", 1)[1]), 50 / 2000) as proxy:
            yield f"{proxy.url}/img", [], log.mark, lambda: log.since()[1]
        return
    import zarrfuse  # noqa: PLC0415  (writes the array to S3)

    with s3_bucket("zarrfuse-cache-bench") as server:
        url = "s3://zarrfuse-cache-bench/img"
        zarrfuse.create_array(url, data=data, chunks=(256, 256),
                              storage_options={"endpoint_url": server.url})
        yield (url, ["--storage-option", f"endpoint_url={server.url}"], server.reset,
               lambda: server.snapshot()[1])


def measure(ctx: Context, store: str = "s3") -> list[Row]:
    side = ctx.pick(4096, 1024)
    data = np.random.default_rng(5).integers(0, 4000, (side, side), dtype="u2")
    zarr.create_array(ctx.work / "img", data=data, chunks=(256, 256))
    rows = []
    issue = "24" if store == "s3" else "32"
    caches = [0]  # a new cache directory for each cold mount; its warm mount reuses it
    with remote(ctx, store, data) as (url, options, mark, sent):
        for measure_, view, pattern in (("chunk files", [], "c/**/*"),
                                        ("whole image", ["--format", "ome-tiff"], "*.tif")):
            sent_by: dict[str, list[float]] = {"cold": [], "warm": []}

            def one(name: str, view: list[str] = view, pattern: str = pattern,
                    sent_by: dict[str, list[float]] = sent_by) -> float:
                caches[0] += name == "cold"
                cache = ctx.work / f"cache{caches[0]}"
                if name == "local":
                    m = ctx.mount(ctx.work / "img", ctx.work / "mnt", "--read-only", *view)
                else:
                    mark()
                    m = ctx.mount(url, ctx.work / "mnt", "--read-only", *view, *options,
                                  "--cache-dir", str(cache), "--metadata-ttl", "3600")
                try:
                    return read_all(m.where, pattern)
                finally:
                    ctx.unmount(m)
                    if name != "local":
                        sent_by[name].append(sent())

            # cold then warm, in that order each round (the warm mount needs the cold one's
            # cache); the local mount rotates around them
            got = ctx.interleave({"cold+warm": lambda one=one: (one("cold"), one("warm")),
                                  "local": lambda one=one: one("local")})
            cold, warm = [c for c, _ in got["cold+warm"]], [w for _, w in got["cold+warm"]]
            rows += [
                Row(f"{measure_}, warm --cache-dir, {store}", "MB/s", warm,
                    ("local mount", got["local"]), floor=at_least(0.8 if store == "s3" else 0.67),
                    issue=issue),
                Row(f"{measure_}, cold --cache-dir, {store}", "MB/s", cold,
                    ("local mount", got["local"]), issue=issue),
                Row(f"{measure_}, bytes the server sent the warm mount", "MB",
                    [b / MB for b in sent_by["warm"]], ("cold mount",
                                                        [b / MB for b in sent_by["cold"]]),
                    floor=at_most(0.1), issue=issue),
            ]
    return rows
