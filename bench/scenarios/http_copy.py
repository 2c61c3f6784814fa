"""``cp -r`` from a web server 50 ms away (issue 32 point 5): a directory of 64 raw chunk
files (256 x 256 uint16, zstd; ``--quick``: 16) copied into tmpfs from a fresh
``--read-only`` mount, beside ``rclone mount --vfs-cache-mode full`` of the same objects
through nginx's directory listing (the baseline). Floor: zarrfuse's time <= 1.0x rclone's.
Also ``ls -l`` of the directory on fresh mounts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import zarr

from bench.harness import Context, Mount, Row, at_most, run, seconds, timed
from bench.remote import DelayProxy, rclone_http

ISSUE = "32"
DELAY_MS = 50.0


def measure(ctx: Context) -> list[Row]:
    from tests.http_servers import nginx  # noqa: PLC0415  (the web server's scenarios)

    n = ctx.pick(64, 16)
    data = np.random.default_rng(2).integers(0, 60000, (256, n * 256)).astype("u2")
    zarr.create_array(ctx.work / "www" / "cp.zarr", data=data, chunks=(256, 256))
    target = Path("/dev/shm") / f"zarrfuse-http-copy-{os.getpid()}"

    def on(mount: str, url: str, work: str) -> float:
        if mount == "zarrfuse":
            m: Mount = ctx.mount(f"{url}/cp.zarr", ctx.work / "mnt", "--read-only")
            folder = m.where / "c/0/000/0"
        else:
            where = ctx.work / f"rclone{len(os.listdir(ctx.work))}"
            m = ctx.foreground(rclone_http(f"{url}/cp.zarr/c/0/", where), where)
            folder = m.where
        try:
            if work == "ls":
                return timed(["ls", "-l", folder])
            shutil.rmtree(target, ignore_errors=True)
            took = seconds(lambda: run(["cp", "-r", folder, target]))
            if len(os.listdir(target)) != n:
                raise RuntimeError(f"{mount}: copied {len(os.listdir(target))} of {n} files")
            return took
        finally:
            shutil.rmtree(target, ignore_errors=True)
            ctx.unmount(m)

    with nginx(ctx.work / "www", ctx.work / "nginx", autoindex=True) as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), DELAY_MS / 2000) as proxy:
        got = ctx.interleave({f"{tool} {work}": lambda t=tool, w=work: on(t, proxy.url, w)
                              for work in ("cp", "ls") for tool in ("zarrfuse", "rclone")})
    return [Row(f"cp -r of {n} chunk files, web server, {DELAY_MS:g} ms a request", "s",
                got["zarrfuse cp"], ("rclone", got["rclone cp"]), floor=at_most(1.0)),
            Row(f"ls -l of the {n} files, fresh mount", "s", got["zarrfuse ls"],
                ("rclone", got["rclone ls"]))]
