#!/usr/bin/env python3
"""Disk cache benchmark (issue 24, point 2): a second mount of a remote image with
``--cache-dir`` against the first mount, and against the same array on a local directory.

One loopback S3 server (moto, in this process) holds a 4096 x 4096 uint16 image in chunks of
256 x 256 (zstd); a local directory holds the same array. Each pass is a fresh mount,
read-only, that reads every chunk file whole (1 MiB reads), then the whole image through
``--format ome-tiff`` (header, then every tile, 1 MiB reads). Passes:

1. S3, cold cache (the first mount: every chunk from the server);
2. S3, warm cache (a second mount on the same ``--cache-dir``);
   both with ``--metadata-ttl 3600`` (a static dataset: the listings kept in the cache are
   trusted for that long, so the second mount asks the server for ``zarr.json`` only);
3. the local directory (no cache: the baseline).

Prints, per measure: MB/s of each pass, bytes the server sent, and the two figures with their
floors: second mount's server bytes < 10% of the first's; second mount's speed >= 0.8x the
local mount's. Exit status 1 if a floor is missed.

``--http``: the same passes on a web server (nginx, which cannot list, behind a proxy that
adds ``--delay-ms``, 50, to every request): issue 32's point 3, a warm cache asks for the
documents alone and reads within 1.5x of the local mount's time (0.67x its pace).

    .venv/bin/python bench/bench_disk_cache.py [--repeat 3] [--http [--delay-ms 50]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import zarr  # noqa: E402  (after the sys.path insert above)

import zarrfuse  # noqa: E402  (after the sys.path insert above)
from bench.bench_latency import DelayProxy  # noqa: E402
from tests.http_servers import nginx  # noqa: E402
from tests.s3server import CREDENTIALS, S3Server  # noqa: E402  (after the sys.path insert above)

BUCKET = "zarrfuse-cache-bench"
ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
SHAPE, CHUNKS = (4096, 4096), (256, 256)
TTL = ["--metadata-ttl", "3600"]
"""A static dataset: listings kept in the cache are trusted for an hour (else every mount
lists every chunk directory anew, a LIST each, and only the chunk bytes come from disk)."""

READ_ALL = """
import os, sys, time
paths = sys.stdin.read().split("\\0")[:-1]
buf = bytearray(1 << 20)
total = 0
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


def _read_all(root: Path, pattern: str) -> tuple[int, float]:
    """Bytes and seconds to read every file under ``root`` matching ``pattern`` (a child
    process, as a user's tool would), in the order the directories list them (as ``cp -r``
    and ``find`` go: an order sorted by name, 0, 1, 10, 11 ..., is no tool's)."""
    wanted = {str(p) for p in root.rglob(pattern) if p.is_file()}
    paths = [path for d, _, names in os.walk(root) for name in names
             if (path := os.path.join(d, name)) in wanted]
    done = subprocess.run([sys.executable, "-c", READ_ALL], input="\0".join(paths) + "\0",
                          capture_output=True, text=True, check=True, timeout=600)
    total, seconds = done.stdout.split()
    return int(total), float(seconds)


@contextlib.contextmanager
def mounted(source: str, where: Path, *args: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run([*ZARRFUSE, "mount", source, str(where), "--read-only", *args],
                   env={**os.environ, **CREDENTIALS}, check=True, timeout=60)
    try:
        yield where
    finally:
        subprocess.run(["fusermount3", "-u", str(where)], timeout=30, check=False)


class _Nginx:
    """What nginx sent since the last snapshot, from its access log: requests by method
    (chunk keys only) and body bytes."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._seen = 0

    def reset(self) -> None:
        self._seen = self.log.read_text().count("\n")

    def snapshot(self) -> tuple[dict[str, int], int]:
        lines = self.log.read_text().splitlines()[self._seen :]
        counts: dict[str, int] = {}
        sent = 0
        for line in lines:
            method, status_bytes = line.split('"')[1].split()[0], line.split('"')[2].split()
            if "/img/c/" in line:
                counts[method] = counts.get(method, 0) + 1
            sent += int(status_bytes[1])
        return counts, sent


def _passes(url: str, remote: list[str], server: object, work: Path, repeat: int,
            floor: float) -> bool:
    """Cold and warm mounts of ``url`` beside the local copy; prints the table; whether
    every floor (warm pace / local pace >= ``floor``, warm bytes < 10%) was met."""
    results: dict[str, dict[str, list[float]]] = {}
    sent: dict[str, dict[str, int]] = {}
    for measure, view, pattern in (
        ("chunk files", [], "c/**/*"), ("whole image", ["--format", "ome-tiff"], "*.tif")
    ):
        results[measure] = {"cold": [], "warm": [], "local": []}
        sent[measure] = {}
        for attempt in range(repeat):
            cache = work / f"cache-{measure[0]}{attempt}"
            for name in ("cold", "warm"):
                server.reset()  # type: ignore[attr-defined]
                with mounted(url, work / f"m-{name}", *view, *remote,
                             "--cache-dir", str(cache), *TTL) as mnt:
                    total, seconds = _read_all(mnt, pattern)
                results[measure][name].append(total / seconds / 1e6)
                counts, sent[measure][name] = server.snapshot()  # type: ignore[attr-defined]
                if attempt == 0:
                    print(f"{measure}, {name} cache: requests {dict(counts)}")
            with mounted(str(work / "img"), work / "m-local", *view) as mnt:
                total, seconds = _read_all(mnt, pattern)
            results[measure]["local"].append(total / seconds / 1e6)
    missed = False
    print(f"{'measure':<12} {'cold MB/s':>10} {'warm MB/s':>10} {'local MB/s':>11} "
          f"{'warm/local':>11} {'floor':>6}  {'server bytes warm/cold':>23} {'floor':>6}")
    for measure, rates in results.items():
        cold, warm, local = (max(rates[k]) for k in ("cold", "warm", "local"))
        ratio = warm / local
        share = sent[measure]["warm"] / max(sent[measure]["cold"], 1)
        ok = ratio >= floor and share < 0.1
        missed |= not ok
        print(f"{measure:<12} {cold:>10.0f} {warm:>10.0f} {local:>11.0f} {ratio:>10.2f}x "
              f"{f'{floor:.2g}x':>6}  {share:>22.1%} {'<10%':>6}  {'met' if ok else 'MISSED'}")
    return not missed


def _http(work: Path, repeat: int, delay_ms: float) -> bool:
    data = np.random.default_rng(5).integers(0, 4000, SHAPE, dtype="u2")
    zarr.create_array(work / "www" / "img", data=data, chunks=CHUNKS)
    zarr.create_array(work / "img", data=data, chunks=CHUNKS)
    with nginx(work / "www", work / "nginx") as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), delay_ms / 2000) as proxy:
        print(f"web server (nginx), {delay_ms:g} ms per request")
        return _passes(f"{proxy.url}/img", [], _Nginx(work / "nginx" / "access.log"), work,
                       repeat, 1 / 1.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="passes per measure (best)")
    parser.add_argument("--http", action="store_true", help="a web server, not S3")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="--http: per request")
    args = parser.parse_args()
    if args.http:
        work = Path(tempfile.mkdtemp(prefix="zarrfuse-cache-bench-"))
        try:
            return 0 if _http(work, args.repeat, args.delay_ms) else 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-cache-bench-"))
    os.environ.update(CREDENTIALS)
    try:
        with S3Server() as server:
            import boto3  # noqa: PLC0415  (test extra)

            boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
                Bucket=BUCKET)
            data = np.random.default_rng(5).integers(0, 4000, SHAPE, dtype="u2")
            options = {"endpoint_url": server.url}
            url = f"s3://{BUCKET}/img"
            zarrfuse.create_array(url, data=data, chunks=CHUNKS, storage_options=options)
            zarr.create_array(work / "img", data=data, chunks=CHUNKS)
            remote = ["--storage-option", f"endpoint_url={server.url}"]
            met = _passes(url, remote, server, work, args.repeat, 0.8)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
