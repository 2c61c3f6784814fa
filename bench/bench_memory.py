#!/usr/bin/env python3
"""Memory benchmark (issue 24, point 6): the daemon's peak RSS while a remote 100k x 100k
whole image is read end to end, against the configured caches plus 300 MB.

One loopback S3 server (moto, in this process) holds a 100,000 x 100,000 uint8 array in
1024 x 1024 chunks (zstd), a band of them stored and the rest absent (the fill value, as in a
sparse slide). The array is mounted ``--format ome-tiff --read-only`` and its file read from
start to end in 1 MiB reads (10 GB), as ``cp`` would. The daemon's peak RSS (``VmHWM``) is
compared with ``--cache-mb`` (the decoded-chunk cache) plus 300 MB.

    .venv/bin/python bench/bench_memory.py [--side 100000] [--cache-mb 256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import zarrfuse  # noqa: E402  (after the sys.path insert above)
from tests.s3server import CREDENTIALS, S3Server  # noqa: E402  (after the sys.path insert above)

BUCKET = "zarrfuse-memory-bench"
ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
CHUNK = 1024
MB = 1_000_000


def _daemon(mountpoint: Path) -> int:
    """The pid of the daemon serving ``mountpoint`` (its command line names it)."""
    want = str(mountpoint).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if want in argv and b"--foreground" in argv:
                return int(proc.name)
    raise SystemExit(f"no daemon found for {mountpoint}")


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} for {pid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", type=int, default=100_000)
    parser.add_argument("--cache-mb", type=int, default=256)
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    os.environ.update(CREDENTIALS)
    with tempfile.TemporaryDirectory(prefix="zarrfuse-memory-") as work, S3Server() as server:
        import boto3  # noqa: PLC0415  (test extra)

        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=BUCKET)
        url = f"s3://{BUCKET}/slide"
        array = zarrfuse.create_array(
            url, shape=(args.side, args.side), chunks=(CHUNK, CHUNK), dtype="u1", fill_value=0,
            storage_options={"endpoint_url": server.url},
        )
        band = np.random.default_rng(6).integers(1, 255, (2 * CHUNK, args.side), dtype="u1")
        array[: 2 * CHUNK, :] = band  # two stored rows of chunks; the rest absent
        mnt = Path(work) / "mnt"
        mnt.mkdir()
        subprocess.run([*ZARRFUSE, "mount", url, str(mnt), "--format", "ome-tiff",
                        "--read-only", "--cache-mb", str(args.cache_mb),
                        "--storage-option", f"endpoint_url={server.url}"], check=True,
                       timeout=120)
        try:
            pid = _daemon(mnt)
            start_rss = _kib(pid, "VmRSS") * 1024
            [image] = list(mnt.glob("*.ome.tif"))
            started, total = time.perf_counter(), 0
            buffer = bytearray(1 << 20)
            marks = []
            with open(image, "rb", buffering=0) as f:
                while n := f.readinto(buffer):
                    total += n
                    if total % (1 << 30) == 0:  # the RSS every GiB read: steady or growing?
                        marks.append(f"{total >> 30}G:{_kib(pid, 'VmRSS') * 1024 / MB:.0f}M")
            print("daemon RSS as the file is read:", " ".join(marks))
            seconds = time.perf_counter() - started
            peak = _kib(pid, "VmHWM") * 1024
        finally:
            subprocess.run(["fusermount3", "-u", str(mnt)], timeout=60, check=False)
    bound = args.cache_mb * (1 << 20) + 300 * MB
    print(f"read {total / 1e9:.1f} GB in {seconds:.0f} s ({total / seconds / MB:.0f} MB/s)")
    print(f"{'daemon RSS':<22} {'at start':>10} {'peak':>10} {'caches + 300 MB':>16} result")
    print(f"{'':<22} {start_rss / MB:>9.0f}M {peak / MB:>9.0f}M {bound / MB:>15.0f}M "
          f"{'met' if peak <= bound else 'MISSED'}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0 if peak <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
