"""zarrfuse against ``rclone mount --vfs-cache-mode full`` and ``s3fs`` on one S3 server
(moto) 50 ms away (issue 24 point 3), each pass a fresh read-only mount: a viewer (the TIFF
header, then every tile by one ``pread``, in a child process) of a 4096 x 4096 uint16 image
(zarrfuse: the zarr array of 256 x 256 zstd chunks as ``--format ome-tiff``; the others: a
tiled TIFF object of the same pixels), and ``cp -r`` of a directory of 64 chunk files of
1 MiB (``--quick``: 1024 x 1024, 16 files). Baseline rclone; goal 1.5x its pace (time <=
0.67x). The viewer's bound: the server alone handing out the image's chunk objects on 16
threads, no delay, no mount."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tifffile

from bench.harness import Context, Row, at_most, run, seconds
from bench.remote import DelayProxy, rclone_s3, s3_bucket, s3fs

ISSUE = "24"
BUCKET, DELAY_MS = "zarrfuse-latency", 50.0
VIEWER = """
import os, sys, time, tifffile
start = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f:
    with tifffile.TiffFile(f) as tif:
        spans = list(zip(tif.pages[0].dataoffsets, tif.pages[0].databytecounts))
    total = sum(len(os.pread(f.fileno(), n, at)) for at, n in spans)
print(time.perf_counter() - start)
"""


def measure(ctx: Context) -> list[Row]:
    import boto3  # noqa: PLC0415  (the test extra)
    import obstore  # noqa: PLC0415  (the server's own pace, as zarrfuse fetches)

    import zarrfuse  # noqa: PLC0415  (writes the arrays to S3)

    side, files, size = ctx.pick(4096, 1024), ctx.pick(64, 16), 1 << 20
    with s3_bucket(BUCKET) as server:
        s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
        options = {"endpoint_url": server.url}
        image = np.random.default_rng(2).integers(0, 4000, (side, side), dtype="u2")
        zarrfuse.create_array(f"s3://{BUCKET}/img", data=image, chunks=(256, 256),
                              storage_options=options)
        tiff = ctx.work / "img.tif"
        tifffile.imwrite(tiff, image, tile=(256, 256))
        s3.upload_file(str(tiff), BUCKET, "img.tif")
        arr = zarrfuse.create_array(f"s3://{BUCKET}/files", shape=(1, files * size),
                                    chunks=(1, size), dtype="u1", compressors=None,
                                    storage_options=options)
        arr[...] = np.random.default_rng(3).integers(0, 255, (1, files * size), "u1")
        store = server.store(BUCKET)
        keys = [o["path"] for batch in obstore.list(store, "img/c/") for o in batch]

        def server_alone() -> float:
            with ThreadPoolExecutor(16) as pool:
                return seconds(lambda: list(pool.map(
                    lambda key: obstore.get(store, key).bytes(), keys)))

        def on(tool: str, what: str, url: str) -> float:
            where = ctx.work / f"{tool}-{time.monotonic_ns()}"
            if tool == "zarrfuse":
                m = ctx.mount(f"s3://{BUCKET}/{'img' if what == 'viewer' else 'files'}",
                              where, "--read-only", f"--storage-option=endpoint_url={url}",
                              *(("--format", "ome-tiff") if what == "viewer" else ()))
                path = m.where / ("img.ome.tif" if what == "viewer" else "c/0/000/0")
            elif tool == "rclone":
                argv, env = rclone_s3(BUCKET, url, where, "--vfs-cache-mode", "full",
                                      "--cache-dir", str(ctx.work / f"{where.name}-cache"))
                m = ctx.foreground(argv, where, env)
                path = m.where / ("img.tif" if what == "viewer" else "files/c/0")
            else:
                m = ctx.foreground(s3fs(BUCKET, url, where), where)
                path = m.where / ("img.tif" if what == "viewer" else "files/c/0")
            try:
                if what == "viewer":
                    return float(run([sys.executable, "-c", VIEWER, path], 900.0,
                                     stdout=subprocess.PIPE, text=True).stdout)
                return seconds(lambda: run(["cp", "-r", path, ctx.work / "copy"], 900.0))
            finally:
                shutil.rmtree(ctx.work / "copy", ignore_errors=True)
                ctx.unmount(m)

        alone = ctx.interleave({"server alone": server_alone})
        with DelayProxy(server.port, DELAY_MS / 2000) as proxy:
            got = ctx.interleave({f"{tool} {what}": lambda t=tool, w=what: on(t, w, proxy.url)
                                  for what in ("viewer", "cp") for tool in
                                  ("zarrfuse", "rclone", "s3fs")})
    rows = []
    for what, label in (("viewer", f"viewer: header, then every tile of {side}^2"),
                        ("cp", f"cp -r of {files} chunk files of 1 MiB")):
        bound = (f"the server alone, {len(keys)} chunk objects", alone["server alone"])
        rows.append(Row(f"{label}, S3 {DELAY_MS:g} ms a request", "s", got[f"zarrfuse {what}"],
                        ("rclone", got[f"rclone {what}"]), bound if what == "viewer" else None,
                        at_most(0.67)))
        rows.append(Row(f"{label}, S3 {DELAY_MS:g} ms a request", "s", got[f"zarrfuse {what}"],
                        ("s3fs", got[f"s3fs {what}"])))
    return rows
