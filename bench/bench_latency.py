#!/usr/bin/env python3
"""Latency benchmark (issue 24, point 3): zarrfuse against ``rclone mount --vfs-cache-mode
full`` and ``s3fs`` on one S3 server 50 ms away.

The server is moto on loopback (in this process); every tool reaches it through a proxy on
loopback that holds each piece of data 25 ms in each direction (50 ms added to every request's
round trip, as to a distant region). Each pass is a fresh mount (cold caches), read-only:

1. **viewer**: a 4096 x 4096 uint16 image read as a viewer reads it: the TIFF header
   (tifffile), then every tile in order (one ``pread`` each). zarrfuse shows the zarr array
   (256 x 256 zstd chunks) as ``--format ome-tiff``; rclone and s3fs read a tiled TIFF object
   of the same pixels (256 x 256 tiles, uncompressed, written by tifffile) in the same bucket.
2. **cp -r**: ``cp -r`` of a directory of 64 chunk files of 1 MiB (zarrfuse's default raw
   view of one row of 64 chunks; the same objects, one prefix, through rclone and s3fs).

Prints seconds per tool and zarrfuse's speed-up over rclone (goal: 1.5x) for each.

    .venv/bin/python bench/bench_latency.py [--delay-ms 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import tifffile  # noqa: E402  (after the sys.path insert above)

import zarrfuse  # noqa: E402  (after the sys.path insert above)
from bench.bench_mount_read import run  # noqa: E402  (after the sys.path insert)
from bench.bench_s3 import unmount, wait_mounted  # noqa: E402  (after the sys.path insert)
from tests.s3server import CREDENTIALS, S3Server  # noqa: E402  (after the sys.path insert)

BUCKET = "zarrfuse-latency"
ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
TOOLS = ("zarrfuse", "rclone", "s3fs")
SIDE, TILE = 4096, 256
FILES, FILE_SIZE = 64, 1 << 20

VIEWER = """
import os, sys, time, tifffile
path = sys.argv[1]
start = time.perf_counter()
with open(path, "rb", buffering=0) as f:
    with tifffile.TiffFile(f) as tif:
        page = tif.pages[0]
        spans = list(zip(page.dataoffsets, page.databytecounts))
    total = sum(len(os.pread(f.fileno(), n, at)) for at, n in spans)
print(total, time.perf_counter() - start)
"""


class DelayProxy:
    """A TCP proxy on loopback that delivers every piece of data ``delay`` seconds after it
    arrived, in each direction (order kept, throughput not capped)."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port, self.delay = upstream_port, delay
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer),
                             return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.ensure_future(deliver())
        try:
            while data := await reader.read(1 << 16):
                queue.put_nowait((time.monotonic() + self.delay, data))
        finally:
            queue.put_nowait((0.0, b""))
            await sender


@contextlib.contextmanager
def mounted(tool: str, url: str, where: Path, *args: str) -> Iterator[Path]:
    """``where`` with the bucket (zarrfuse: ``args`` name the source) mounted read-only."""
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **CREDENTIALS}
    proc: subprocess.Popen | None = None
    log = open(where.parent / f"{tool}.log", "ab")  # noqa: SIM115  (closed below)
    try:
        if tool == "zarrfuse":
            subprocess.run([*ZARRFUSE, "mount", args[0], str(where), *args[1:], "--read-only",
                            f"--storage-option=endpoint_url={url}"], env=env, check=True,
                           timeout=120, stdout=log, stderr=log)
        elif tool == "rclone":
            env.pop("AWS_CA_BUNDLE", None)
            env.update({
                "RCLONE_CONFIG_ZFLAT_TYPE": "s3", "RCLONE_CONFIG_ZFLAT_PROVIDER": "Other",
                "RCLONE_CONFIG_ZFLAT_ENDPOINT": url,
                "RCLONE_CONFIG_ZFLAT_ACCESS_KEY_ID": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "RCLONE_CONFIG_ZFLAT_SECRET_ACCESS_KEY": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                "RCLONE_CONFIG_ZFLAT_REGION": "us-east-1",
                "RCLONE_CONFIG_ZFLAT_FORCE_PATH_STYLE": "true",
            })
            cache = where.parent / f"rclone-cache-{where.name}"
            proc = subprocess.Popen(
                ["rclone", "mount", f"zflat:{BUCKET}", str(where), "--read-only",
                 "--use-server-modtime", "--vfs-cache-mode", "full", "--cache-dir", str(cache),
                 "--config", str(where.parent / "rclone.conf")],
                env=env, stdout=log, stderr=log, start_new_session=True)
        else:
            passwd = where.parent / "s3fs.passwd"
            passwd.write_text(f"{CREDENTIALS['AWS_ACCESS_KEY_ID']}:"
                              f"{CREDENTIALS['AWS_SECRET_ACCESS_KEY']}\n")
            passwd.chmod(0o600)
            proc = subprocess.Popen(
                ["s3fs", BUCKET, str(where), "-f", "-o",
                 f"url={url},use_path_request_style,passwd_file={passwd},ro"],
                env=env, stdout=log, stderr=log, start_new_session=True)
        wait_mounted(where, proc)
        yield where
    finally:
        unmount(where)
        if proc is not None:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()


def _viewer(path: Path) -> float:
    done = subprocess.run([sys.executable, "-c", VIEWER, str(path)], capture_output=True,
                          text=True, check=True, timeout=900)
    return float(done.stdout.split()[1])


def _copy(source: Path, target: Path) -> float:
    started = time.perf_counter()
    run(["cp", "-r", str(source), str(target)], 900.0, check=True)  # timed to its exit
    seconds = time.perf_counter() - started
    shutil.rmtree(target)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    os.environ.update(CREDENTIALS)
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-latency-"))
    times: dict[str, dict[str, float]] = {"viewer": {}, "cp -r": {}}
    try:
        with S3Server() as server:
            import boto3  # noqa: PLC0415  (test extra)

            s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
            s3.create_bucket(Bucket=BUCKET)
            options = {"endpoint_url": server.url}
            image = np.random.default_rng(2).integers(0, 4000, (SIDE, SIDE), dtype="u2")
            zarrfuse.create_array(f"s3://{BUCKET}/img", data=image, chunks=(TILE, TILE),
                                  storage_options=options)
            tiff = work / "img.tif"
            tifffile.imwrite(tiff, image, tile=(TILE, TILE))
            s3.upload_file(str(tiff), BUCKET, "img.tif")
            # One row of 64 chunks: in zarrfuse's default (fanout) view, one directory of 64
            # chunk files, c/0/000/0/000 ... c/0/000/0/063; in the bucket, files/c/0/0 ... 63.
            files = zarrfuse.create_array(f"s3://{BUCKET}/files", shape=(1, FILES * FILE_SIZE),
                                          chunks=(1, FILE_SIZE), dtype="u1", compressors=None,
                                          storage_options=options)
            files[...] = np.random.default_rng(3).integers(0, 255, (1, FILES * FILE_SIZE), "u1")
            floor = server_floor(s3, server.url)
            with DelayProxy(server.port, args.delay_ms / 2000) as proxy:
                for tool in TOOLS:
                    viewer, copy = [], []
                    for _ in range(args.repeat):
                        where = work / f"{tool}-mnt"
                        if tool == "zarrfuse":
                            with mounted(tool, proxy.url, where, f"s3://{BUCKET}/img",
                                         "--format", "ome-tiff") as mnt:
                                viewer.append(_viewer(mnt / "img.ome.tif"))
                            with mounted(tool, proxy.url, where, f"s3://{BUCKET}/files") as mnt:
                                copy.append(_copy(mnt / "c/0/000/0", work / "copy"))
                        else:
                            with mounted(tool, proxy.url, where) as mnt:
                                viewer.append(_viewer(mnt / "img.tif"))
                            with mounted(tool, proxy.url, where) as mnt:
                                copy.append(_copy(mnt / "files/c/0", work / "copy"))
                    times["viewer"][tool], times["cp -r"][tool] = min(viewer), min(copy)
                    print(f"{tool}: viewer {min(viewer):.2f} s, cp -r {min(copy):.2f} s",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.delay_ms:g} ms added per request; seconds, fresh mount, best of "
          f"{args.repeat}")
    print(f"{'measure':<8} {'zarrfuse':>9} {'rclone':>8} {'s3fs':>8} {'zarrfuse vs rclone':>19}"
          f" {'goal':>5}")
    missed = False
    for measure, row in times.items():
        speedup = row["rclone"] / row["zarrfuse"]
        missed |= speedup < 1.5
        print(f"{measure:<8} {row['zarrfuse']:>9.2f} {row['rclone']:>8.2f} {row['s3fs']:>8.2f} "
              f"{speedup:>18.2f}x {'1.5x':>5} {'met' if speedup >= 1.5 else 'MISSED'}")
    print(f"\nthe server's own cost, no delay, no mount: the image's {floor['objects']:.0f} chunk "
          f"objects fetched on 16 threads {floor['chunks']:.2f} s; the one TIFF object "
          f"{floor['tiff']:.2f} s")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 1 if missed else 0


def server_floor(s3, url: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """What the test server itself takes to hand out the viewer's objects, with no delay
    and no mount: the image's chunk objects (on 16 threads, through obstore as zarrfuse
    fetches them) against the one TIFF object rclone and s3fs read. The viewer row cannot
    beat the first, whatever the mount does."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import obstore  # noqa: PLC0415
    from obstore.store import S3Store  # noqa: PLC0415

    store = S3Store(BUCKET, endpoint=url, region="us-east-1",
                    access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                    secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                    client_options={"allow_http": True}, virtual_hosted_style_request=False)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="img/c/") for o in page.get("Contents", [])]
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: obstore.get(store, key).bytes(), keys))
    chunks = time.perf_counter() - started
    started = time.perf_counter()
    obstore.get(store, "img.tif").bytes()
    return {"objects": len(keys), "chunks": chunks, "tiff": time.perf_counter() - started}


if __name__ == "__main__":
    sys.exit(main())
