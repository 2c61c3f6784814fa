#!/usr/bin/env python3
"""S3 benchmark: zarrfuse against ``rclone mount`` and ``s3fs`` (s3fs-fuse) on one moto bucket.

One loopback S3 server (moto, in this process, tests/s3server.py) holds one bucket; the
three filesystems mount that same bucket read-only, each on a fresh mount for every timed
pass (cold caches everywhere), and read the same objects:

1. sequential read of every chunk file of an array (files of 4 MiB, one after another, 1 MiB
   reads): MB/s;
2. ``ls -lR`` of an array of 10,000 one-byte chunks: seconds;
3. the first 64 KiB of each of 200 shards of 8 MiB: seconds, requests, bytes the server sent.

Requests and body bytes are counted at the server, per tool and measure. rclone runs with
``--read-only --use-server-modtime`` (without the latter it asks for each file's metadata
with a HEAD when listing); s3fs with its defaults plus what a non-AWS endpoint needs.
zarrfuse mounts the bucket's root group with ``--read-only``.

    .venv/bin/python bench/bench_s3.py            # a few minutes
    .venv/bin/python bench/bench_s3.py --quick    # smoke run

Prints a table measure / zarrfuse / rclone / s3fs / ratio vs rclone / floor / result, and the
load (``uptime``) before and after; exit status 1 if a floor is missed. Floors: zarrfuse
throughput >= 1.0x rclone, ``ls -lR`` time <= 1.0x rclone. moto is a Python server: every
request costs it milliseconds of CPU, and a ranged GET copies the whole object first, so the
absolute figures are the server's; the ratios and request counts are the point.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import obstore  # noqa: E402  (after the sys.path insert above)
import zarr  # noqa: E402  (after the sys.path insert above)

import zarrfuse  # noqa: E402  (after the sys.path insert above)
from tests.s3server import CREDENTIALS, S3Server  # noqa: E402  (after the sys.path insert above)
from zarrfuse.api.arrays import open_store_path  # noqa: E402  (after the sys.path insert above)

MiB = 1 << 20
KiB = 1 << 10
BUCKET = "zarrfuse-bench"
MOUNT_TIMEOUT = 60.0
RUN_TIMEOUT = 600.0
TOOLS = ("zarrfuse", "rclone", "s3fs")
ZARRFUSE = [sys.executable, "-m", "zarrfuse"]

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

READ_HEADS = """
import os, sys, time
paths = sys.stdin.read().split("\\0")[:-1]
total = 0
start = time.perf_counter()
for path in paths:
    fd = os.open(path, os.O_RDONLY)
    try:
        total += len(os.read(fd, 64 << 10))
    finally:
        os.close(fd)
print(total, time.perf_counter() - start)
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()


# --- data ---------------------------------------------------------------------------------


@dataclass
class Layout:
    seq_files: int
    seq_size: int
    ls_shape: tuple[int, int]
    shards: int
    shard_size: int


def make_data(server: S3Server, layout: Layout) -> None:
    """The bucket: a root group with arrays ``seq``, ``ls`` and ``shards``."""
    options = {"endpoint_url": server.url}
    url = f"s3://{BUCKET}"
    root = zarr.core.sync.sync(open_store_path(url, mode="a", storage_options=options))
    zarr.create_group(root)
    store = root.store.store  # the obstore S3Store under zarr's ObjectStore
    zarrfuse.create_array(
        f"{url}/seq", shape=(layout.seq_files, layout.seq_size), chunks=(1, layout.seq_size),
        dtype="u1", compressors=None, storage_options=options,
    )
    rng = np.random.default_rng(1)
    blobs = [rng.bytes(layout.seq_size) for _ in range(4)]
    zarrfuse.create_array(
        f"{url}/ls", shape=layout.ls_shape, chunks=(1, 1), dtype="u1", compressors=None,
        storage_options=options,
    )
    rows, cols = layout.ls_shape
    shards = zarrfuse.create_array(
        f"{url}/shards", shape=(layout.shards, layout.shard_size), dtype="u1",
        shards=(1, layout.shard_size), chunks=(1, layout.shard_size // 64), compressors=None,
        storage_options=options,
    )
    shards[0] = np.frombuffer(rng.bytes(layout.shard_size), dtype="u1")  # one real shard
    first_shard = obstore.get(store, "shards/c/0/0").bytes()

    def put(item: tuple[str, bytes | memoryview]) -> None:
        obstore.put(store, item[0], item[1], use_multipart=False)

    items: list[tuple[str, bytes | memoryview]] = []
    items += [(f"seq/c/{i}/0", blobs[i % len(blobs)]) for i in range(layout.seq_files)]
    items += [(f"ls/c/{r}/{c}", bytes([(r + c) % 255 + 1]))
              for r in range(rows) for c in range(cols)]
    items += [(f"shards/c/{i}/0", first_shard) for i in range(1, layout.shards)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, items))


# --- mounts -------------------------------------------------------------------------------


def mounted_points() -> set[str]:
    with open("/proc/self/mountinfo") as f:
        return {line.split()[4] for line in f}


def wait_mounted(path: Path, proc: subprocess.Popen | None) -> None:
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while str(path) not in mounted_points():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"mount of {path} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} was not mounted within {MOUNT_TIMEOUT:g} s")
        time.sleep(0.05)
    os.stat(path)  # the daemon answers


def unmount(path: Path) -> None:
    for cmd in (["fusermount3", "-u"], ["fusermount", "-u"], ["umount", "-l"]):
        if str(path) not in mounted_points():
            return
        subprocess.run([*cmd, str(path)], capture_output=True, timeout=30)
        time.sleep(0.2)


@contextlib.contextmanager
def mount(tool: str, server: S3Server, where: Path) -> Iterator[Path]:
    """``where`` with the bucket mounted read-only by ``tool``; always unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **CREDENTIALS}
    proc: subprocess.Popen | None = None
    log_file = open(where.parent / f"{tool}.log", "ab")  # noqa: SIM115  (open until unmounted, below)
    try:
        if tool == "zarrfuse":
            subprocess.run(
                [*ZARRFUSE, "mount", f"s3://{BUCKET}", str(where), "--read-only",
                 f"--storage-option=endpoint_url={server.url}"],
                env=env, check=True, timeout=MOUNT_TIMEOUT, stdout=log_file, stderr=log_file,
            )
        elif tool == "rclone":
            # rclone's S3 client cannot take a CA bundle on its HTTP transport (and plain
            # http on loopback needs none): without this it refuses to start.
            env.pop("AWS_CA_BUNDLE", None)
            env.update({
                "RCLONE_CONFIG_ZFBENCH_TYPE": "s3", "RCLONE_CONFIG_ZFBENCH_PROVIDER": "Other",
                "RCLONE_CONFIG_ZFBENCH_ENDPOINT": server.url,
                "RCLONE_CONFIG_ZFBENCH_ACCESS_KEY_ID": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "RCLONE_CONFIG_ZFBENCH_SECRET_ACCESS_KEY": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                "RCLONE_CONFIG_ZFBENCH_REGION": "us-east-1",
                "RCLONE_CONFIG_ZFBENCH_FORCE_PATH_STYLE": "true",
            })
            proc = subprocess.Popen(
                ["rclone", "mount", f"zfbench:{BUCKET}", str(where), "--read-only",
                 "--use-server-modtime", "--config", str(where.parent / "rclone.conf")],
                env=env, stdout=log_file, stderr=log_file, start_new_session=True,
            )
        else:
            passwd = where.parent / "s3fs.passwd"
            passwd.write_text(
                f"{CREDENTIALS['AWS_ACCESS_KEY_ID']}:{CREDENTIALS['AWS_SECRET_ACCESS_KEY']}\n"
            )
            passwd.chmod(0o600)
            proc = subprocess.Popen(
                ["s3fs", BUCKET, str(where), "-f", "-o",
                 f"url={server.url},use_path_request_style,passwd_file={passwd},ro"],
                env=env, stdout=log_file, stderr=log_file, start_new_session=True,
            )
        try:
            wait_mounted(where, proc)
        except RuntimeError as e:
            log_file.flush()
            tail = (where.parent / f"{tool}.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{e}; its log ends:\n{tail}") from None
        yield where
    finally:
        unmount(where)
        if proc is not None:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log_file.close()


def chunk_files(root: Path) -> list[str]:
    """Every file under ``root`` except zarr.json, sorted (grid order for both layouts)."""
    out = subprocess.run(
        ["find", str(root), "-type", "f", "-not", "-name", "zarr.json", "-print0"],
        capture_output=True, timeout=RUN_TIMEOUT, check=True,
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p)


def run_reader(script: str, paths: Sequence[str]) -> tuple[int, float]:
    proc = subprocess.run(
        [sys.executable, "-c", script], input="".join(p + "\0" for p in paths).encode(),
        capture_output=True, timeout=RUN_TIMEOUT, check=True,
    )
    total, seconds = proc.stdout.split()
    return int(total), float(seconds)


# --- measures -----------------------------------------------------------------------------


@dataclass
class Figure:
    """One measure for one tool: its passes, and the server's counts in the last pass."""

    values: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    delivered: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def measure(
    server: S3Server, tool: str, work: Path, what: str, layout: Layout
) -> tuple[float, Counter[str], int, int]:
    """One fresh-mount pass of ``what``; (value, requests, bytes sent, bytes delivered)."""
    with mount(tool, server, work / f"mnt-{tool}") as mnt:
        if what == "seq":
            paths = chunk_files(mnt / "seq")
            assert len(paths) == layout.seq_files, (tool, len(paths))
            server.reset()
            total, seconds = run_reader(READ_ALL, paths)
            assert total == layout.seq_files * layout.seq_size, (tool, total)
            value = total / seconds / 1e6
        elif what == "ls":
            server.reset()
            start = time.perf_counter()
            out = subprocess.run(
                ["ls", "-lR", str(mnt / "ls")], capture_output=True, timeout=RUN_TIMEOUT,
                check=True,
            ).stdout
            value = time.perf_counter() - start
            lines = out.splitlines()
            files = sum(1 for line in lines if line[:1] == b"-" and not line.endswith(b"zarr.json"))
            assert files == layout.ls_shape[0] * layout.ls_shape[1], (tool, files)
            total = 0
        else:
            paths = chunk_files(mnt / "shards")
            assert len(paths) == layout.shards, (tool, len(paths))
            server.reset()
            total, value = run_reader(READ_HEADS, paths)
            assert total == layout.shards * 64 * KiB, (tool, total)
        requests, sent = server.snapshot()
    return value, requests, sent, total


MEASURES = {  # name: (label, short label)
    "seq": ("sequential read of all chunk files, MB/s", "sequential read"),
    "ls": ("ls -lR of the 10,000-chunk array, s", "ls -lR"),
    "heads": ("first 64 KiB of 200 shards, s", "first 64 KiB of shards"),
}
FLOORS = {"seq": ("zarrfuse >= 1.0x rclone", 1.0), "ls": ("zarrfuse <= 1.0x rclone", 1.0)}


def requests_text(requests: Counter[str]) -> str:
    order = ("LIST", "HEAD", "GET")
    parts = [f"{requests[k]} {k}" for k in order if requests[k]]
    parts += [f"{n} {k}" for k, n in sorted(requests.items()) if k not in order]
    return ", ".join(parts) or "none"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, one pass")
    parser.add_argument("--repeat", type=int, default=3, help="fresh-mount passes per measure")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument("--measures", default=",".join(MEASURES),
                        help=f"comma-separated subset of {', '.join(MEASURES)}")
    args = parser.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    measures = [m for m in args.measures.split(",") if m]
    if not set(measures) <= set(MEASURES) or not set(tools) <= set(TOOLS):
        parser.error(f"--measures: {', '.join(MEASURES)}; --tools: {', '.join(TOOLS)}")
    missing = [t for t in tools if t != "zarrfuse" and shutil.which(t) is None]
    if missing:
        print(f"bench_s3: {', '.join(missing)} not installed (scripts/dev setup installs them)",
              file=sys.stderr)
        return 2
    if args.quick:
        layout = Layout(seq_files=8, seq_size=4 * MiB, ls_shape=(20, 50), shards=20,
                        shard_size=8 * MiB)
        args.repeat = 1
    else:
        layout = Layout(seq_files=64, seq_size=4 * MiB, ls_shape=(100, 100), shards=200,
                        shard_size=8 * MiB)
    os.environ.update(CREDENTIALS)
    load_before = uptime()
    log(f"load before: {load_before}")
    results: dict[str, dict[str, Figure]] = {m: {t: Figure() for t in tools} for m in measures}
    with tempfile.TemporaryDirectory(prefix="zarrfuse-bench-s3-") as tmp, S3Server() as server:
        work = Path(tmp)
        log(f"moto S3 at {server.url}; writing the bucket")
        boto_client(server).create_bucket(Bucket=BUCKET)
        make_data(server, layout)
        for what in measures:
            for n in range(args.repeat):
                for tool in tools:  # interleaved, so load changes hit every tool alike
                    value, requests, sent, delivered = measure(server, tool, work, what, layout)
                    figure = results[what][tool]
                    figure.values.append(value)
                    figure.requests, figure.sent, figure.delivered = requests, sent, delivered
                    log(f"{what} pass {n + 1} {tool}: {value:.3f} ({requests_text(requests)}; "
                        f"{sent / MiB:.1f} MiB sent; load {os.getloadavg()[0]:.2f})")
    load_after = uptime()
    return report(results, tools, layout, load_before, load_after, args.repeat)


def boto_client(server: S3Server):  # type: ignore[no-untyped-def]
    import boto3  # noqa: PLC0415  (a dev-only dependency, loaded only when needed)

    return boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")


def report(results, tools, layout, load_before, load_after, repeat) -> int:  # type: ignore[no-untyped-def]
    ok = True
    print(f"\nmedian of {repeat} fresh-mount pass(es); seq: {layout.seq_files} files of "
          f"{layout.seq_size // MiB} MiB; ls: {layout.ls_shape[0] * layout.ls_shape[1]} chunks; "
          f"heads: {layout.shards} shards of {layout.shard_size // MiB} MiB\n")
    header = ["measure", *tools, "ratio vs rclone", "floor", "result"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for what in results:
        label, short = MEASURES[what]
        row = [label] + [f"{results[what][t].median:.3g}" for t in tools]
        ratio_text, floor_text, result = "", "", ""
        if "zarrfuse" in tools and "rclone" in tools:
            ratio = results[what]["zarrfuse"].median / results[what]["rclone"].median
            ratio_text = f"{ratio:.2f}x"
            if what in FLOORS:
                floor_text, limit = FLOORS[what]
                passed = ratio >= limit if what == "seq" else ratio <= limit
                result = "PASS" if passed else "MISS"
                ok &= passed
        print("| " + " | ".join([*row, ratio_text, floor_text, result]) + " |")
        requests_row = [f"{short}: S3 requests"]
        requests_row += [requests_text(results[what][t].requests) for t in tools]
        print("| " + " | ".join([*requests_row, "", "", ""]) + " |")
        sent_row = [f"{short}: MiB sent by the server"]
        sent_row += [f"{results[what][t].sent / MiB:.1f}" for t in tools]
        print("| " + " | ".join([*sent_row, "", "", ""]) + " |")
    print(f"\nload before: {load_before}\nload after:  {load_after}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
