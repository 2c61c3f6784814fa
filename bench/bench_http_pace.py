#!/usr/bin/env python3
"""Remote pace on a web server (issue 32's first two rows): the whole image of a 4096 x 4096
uint16 array in 256 x 256 zstd chunks (256 chunks; ``--sharded``: in 16 shards) served by
nginx behind a proxy that adds ``--delay-ms`` (50) to every round trip, read as
``tifffile.imread`` of zarrfuse's ``--format ome-tiff`` file, beside zarr-python reading the
same URL in process (its default concurrency, and 64). Every pixel is checked. Each
zarrfuse pass is a fresh mount.

Prints seconds per reader and zarrfuse / zarr-python (the issue measured 16x; its floor is
zarr-python's pace), and the chunk requests nginx saw per zarrfuse pass (HEAD, GET).

``--first-paint``: issue 32's point 4 instead, a viewer's first look on a fresh mount (the
header through tifffile, then the first tile's ``pread``) of the whole-image file of (a) the
256-chunk array, (b) the same in 16 shards and (c) a 100,000 x 100,000 image (its first
4 x 4 chunks stored), with the chunk requests nginx saw and the time in round trips;
floor: at most 3 round trips, under 0.25 s at 50 ms.

``--copy``: issue 32's point 5 instead, ``cp -r`` into tmpfs of a directory of 64 raw chunk
files (256 x 256 uint16, zstd) on a fresh ``--read-only`` mount, beside ``rclone mount``
(``--vfs-cache-mode full``) of the same objects through nginx's directory listing; floor:
at least rclone's pace.

``--s3``, ``--azure``, ``--gcs``: the whole-image rows on S3 (moto, in this process), Azure
(Azurite) or GCS (fake-gcs-server) instead, behind the same proxy; zarr-python reads through
obstore, as zarrfuse does. The servers spend milliseconds of CPU per request on the same 2
cores: compare the ratios.

    .venv/bin/python bench/bench_http_pace.py [--delay-ms 50] [--rounds 3] [--sharded]
    .venv/bin/python bench/bench_http_pace.py --first-paint [--delay-ms 50] [--rounds 3]
    .venv/bin/python bench/bench_http_pace.py --copy [--delay-ms 50] [--rounds 3]
    .venv/bin/python bench/bench_http_pace.py --s3|--azure|--gcs [--sharded] [--delay-ms 50]
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
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.bench_latency import DelayProxy  # noqa: E402  (after the sys.path insert above)
from bench.bench_mount_read import run  # noqa: E402
from bench.bench_s3 import unmount, wait_mounted  # noqa: E402
from bench.copy_and_image_rows import first_tile, make_slide  # noqa: E402
from tests.http_servers import nginx  # noqa: E402
from tests.mounting import mounted  # noqa: E402


def _zarrfuse(url: str, where: Path, expected: np.ndarray, log: Path) -> tuple[float, int, int]:
    import tifffile  # noqa: PLC0415

    with mounted(f"{url}/img.zarr", where, "--read-only", "--format", "ome-tiff") as mnt:
        before = log.read_text().count("\n")
        start = time.perf_counter()
        image = tifffile.imread(mnt / "img.ome.tif")
        took = time.perf_counter() - start
        lines = [line for line in log.read_text().splitlines()[before:] if "/img.zarr/c/" in line]
    assert np.array_equal(image, expected), "zarrfuse: wrong pixels"
    return took, sum('"HEAD ' in line for line in lines), sum('"GET ' in line for line in lines)


def _zarr_python(url: str, expected: np.ndarray, concurrency: int | None) -> float:
    import zarr  # noqa: PLC0415

    settings = {} if concurrency is None else {"async.concurrency": concurrency}
    with zarr.config.set(settings):
        start = time.perf_counter()
        image = zarr.open_array(f"{url}/img.zarr", mode="r")[...]
        took = time.perf_counter() - start
    assert np.array_equal(image, expected), "zarr-python: wrong pixels"
    return took


def _first_paints(work: Path, delay_ms: float, rounds: int) -> None:
    """Issue 32, point 4: header and first tile on a fresh mount, per data set."""
    import zarr  # noqa: PLC0415

    data = (np.arange(4096 * 4096, dtype=np.uint32) * 2654435761 % 65521).astype("u2")
    data = data.reshape(4096, 4096)
    sets = {"(a) 256 chunks": "a.zarr", "(b) 16 shards": "b.zarr", "(c) 100k x 100k": "c.zarr"}
    zarr.create_array(work / "www" / "a.zarr", data=data, chunks=(256, 256))
    zarr.create_array(work / "www" / "b.zarr", data=data, chunks=(256, 256),
                      shards=(1024, 1024))
    make_slide(work / "www" / "c.zarr")
    times: dict[str, list[float]] = {name: [] for name in sets}
    asked: dict[str, list[int]] = {name: [] for name in sets}
    log = work / "nginx" / "access.log"
    with nginx(work / "www", work / "nginx") as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), delay_ms / 2000) as proxy:
        for round_ in range(rounds):
            for name, store in sets.items():
                with mounted(f"{proxy.url}/{store}", work / f"mnt{round_}{store}", "--read-only",
                             "--format", "ome-tiff") as mnt:
                    before = log.read_text().count("\n")
                    times[name].append(first_tile(mnt / f"{store.removesuffix('.zarr')}.ome.tif"))
                    asked[name].append(sum(f"/{store}/c/" in line for line in
                                           log.read_text().splitlines()[before:]))
    print(f"first paint (header, then the first tile), fresh mount, {delay_ms:g} ms per "
          f"request, median of {rounds}; floor: 3 round trips")
    for name in sets:
        took = statistics.median(times[name])
        trips = took / (delay_ms / 1000) if delay_ms else float("nan")
        print(f"  {name:<18} {took:6.3f} s  = {trips:4.1f} round trips; chunk requests "
              f"(all, incl. read-ahead) {asked[name]}")


@contextlib.contextmanager
def _rclone(url: str, where: Path) -> Iterator[Path]:
    """``rclone mount`` of the web server directory ``url`` on ``where``, read-only."""
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        ["rclone", "mount", ":http:", str(where), "--http-url", url, "--read-only",
         "--vfs-cache-mode", "full", "--cache-dir", str(where.parent / f"{where.name}-cache")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_mounted(where, proc)
        yield where
    finally:
        unmount(where)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _copy_seconds(source: Path, target: Path) -> float:
    shutil.rmtree(target, ignore_errors=True)
    start = time.perf_counter()
    run(["cp", "-r", str(source), str(target)], 600.0, check=True)  # timed to its exit
    took = time.perf_counter() - start
    shutil.rmtree(target, ignore_errors=True)
    return took


def _ls_seconds(folder: Path) -> float:
    start = time.perf_counter()
    run(["ls", "-l", str(folder)], 600.0, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _copies(work: Path, delay_ms: float, rounds: int) -> None:
    """Issue 32, point 5: cp -r of 64 chunk files, zarrfuse's raw view against rclone."""
    import zarr  # noqa: PLC0415

    data = np.random.default_rng(2).integers(0, 60000, (256, 64 * 256)).astype("u2")
    zarr.create_array(work / "www" / "cp.zarr", data=data, chunks=(256, 256))
    target = Path("/dev/shm") / f"zarrfuse-http-copy-{os.getpid()}"
    times: dict[str, list[float]] = {"zarrfuse": [], "rclone": [], "zarrfuse ls": [],
                                     "rclone ls": []}
    asked: list[int] = []
    log = work / "nginx" / "access.log"
    with nginx(work / "www", work / "nginx", autoindex=True) as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), delay_ms / 2000) as proxy:
        for round_ in range(rounds):
            with mounted(f"{proxy.url}/cp.zarr", work / f"z{round_}", "--read-only") as mnt:
                folder = next(Path(d) for d, _, files in os.walk(mnt) if len(files) == 64)
                before = log.read_text().count("\n")
                times["zarrfuse"].append(_copy_seconds(folder, target))
                asked.append(sum("/cp.zarr/c/" in line
                                 for line in log.read_text().splitlines()[before:]))
            with _rclone(f"{proxy.url}/cp.zarr/c/0/", work / f"r{round_}") as mnt:
                times["rclone"].append(_copy_seconds(mnt, target))
            with mounted(f"{proxy.url}/cp.zarr", work / f"zl{round_}", "--read-only") as mnt:
                folder = next(Path(d) for d, _, files in os.walk(mnt) if len(files) == 64)
            with mounted(f"{proxy.url}/cp.zarr", work / f"zl{round_}", "--read-only") as mnt:
                times["zarrfuse ls"].append(_ls_seconds(mnt / folder.relative_to(
                    work / f"zl{round_}")))
            with _rclone(f"{proxy.url}/cp.zarr/c/0/", work / f"rl{round_}") as mnt:
                times["rclone ls"].append(_ls_seconds(mnt))
    zarrfuse, rclone, zls, rls = (statistics.median(times[k]) for k in (
        "zarrfuse", "rclone", "zarrfuse ls", "rclone ls"))
    print(f"cp -r of 64 chunk files, fresh mounts, {delay_ms:g} ms per request, median of "
          f"{rounds}")
    print(f"  zarrfuse {zarrfuse:6.2f} s (chunk requests {asked})   rclone {rclone:6.2f} s   "
          f"pace / rclone's: {rclone / zarrfuse:.2f}x (floor: 1.0x)")
    print(f"  ls -l of the same directory, fresh mounts: zarrfuse {zls:6.2f} s   rclone "
          f"{rls:6.2f} s")


@contextlib.contextmanager
def _object_store(kind: str, work: Path) -> Iterator[tuple[str, int, Callable[[str], dict]]]:
    """A loopback object store with a bucket: (its URL for zarrfuse, its port, the storage
    options that reach it at a given endpoint)."""
    if kind == "s3":
        import boto3  # noqa: PLC0415  (test extra)

        from tests.s3server import CREDENTIALS, S3Server  # noqa: PLC0415

        os.environ.update(CREDENTIALS)
        with S3Server() as server:
            boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
                Bucket="pace")
            yield "s3://pace/img.zarr", server.port, lambda at: {"endpoint_url": at}
        return
    if kind == "gcs":
        yield from _gcs_store(work)
        return
    from tests.azurite import ACCOUNT, KEY, azurite  # noqa: PLC0415

    with azurite(work / "azurite") as emulator:
        emulator.create_container("pace")
        port = int(emulator.endpoint.split(":")[2].split("/")[0])
        yield "az://pace/img.zarr", port, lambda at: {
            "account_name": ACCOUNT, "account_key": KEY,
            "endpoint_url": f"{at}/{ACCOUNT}" if at.count("/") == 2 else at}


def _gcs_store(work: Path) -> Iterator[tuple[str, int, Callable[[str], dict]]]:
    """fake-gcs-server with a bucket, as ``_object_store`` yields it."""
    from tests.gcsserver import fake_gcs  # noqa: PLC0415  (test extra)

    (work / "gcs").mkdir()
    with fake_gcs(work / "gcs") as emulator:
        emulator.create_bucket("pace")
        yield "gs://pace/img.zarr", int(emulator.url.rsplit(":", 1)[1]), lambda at: {
            **emulator.storage_options, "endpoint_url": at}


def _create(url: str, data: np.ndarray, sharded: bool, options: dict, work: Path) -> None:
    """The image at ``url``; on GCS made in a local directory and uploaded through the
    emulator's JSON API (fake-gcs-server takes no plain PUT: tests/gcsserver.py)."""
    import zarrfuse  # noqa: PLC0415

    shards = (1024, 1024) if sharded else None
    if not url.startswith("gs://"):
        zarrfuse.create_array(url, data=data, chunks=(256, 256), shards=shards,
                              storage_options=options)
        return
    from tests.gcsserver import FakeGCS  # noqa: PLC0415

    zarrfuse.create_array(work / "gcs-img.zarr", data=data, chunks=(256, 256), shards=shards)
    emulator = FakeGCS(int(options["endpoint_url"].rsplit(":", 1)[1]),
                       work / "gcs" / "fake-gcs-server.log",
                       Path(options["token"]))
    emulator.upload_tree(work / "gcs-img.zarr", "pace", "img.zarr")


def _object_store_whole_images(kind: str, work: Path, data: np.ndarray, sharded: bool,
                               delay_ms: float, rounds: int) -> None:
    """The whole-image rows on S3 (moto), Azure (Azurite) or GCS (fake-gcs-server) behind
    the delaying proxy."""
    import tifffile  # noqa: PLC0415
    import zarr  # noqa: PLC0415

    from zarrfuse.api.arrays import open_store_path  # noqa: PLC0415
    from zarrfuse.zarr_compat import sync  # noqa: PLC0415

    times: dict[str, list[float]] = {"zarrfuse": [], "zarr-python 64": []}
    with _object_store(kind, work) as (url, port, options):
        _create(url, data, sharded, options(f"http://127.0.0.1:{port}"), work)
        with DelayProxy(port, delay_ms / 2000) as proxy:
            remote = [f"--storage-option={k}={v}" for k, v in options(proxy.url).items()]
            for round_ in range(rounds):
                with mounted(url, work / f"{kind}mnt{round_}", "--read-only", "--format",
                             "ome-tiff", *remote) as mnt:
                    start = time.perf_counter()
                    image = tifffile.imread(mnt / "img.ome.tif")
                    times["zarrfuse"].append(time.perf_counter() - start)
                assert np.array_equal(image, data), "zarrfuse: wrong pixels"
                with zarr.config.set({"async.concurrency": 64}):
                    path = sync(open_store_path(url, mode="r", storage_options=options(proxy.url)))
                    start = time.perf_counter()
                    image = zarr.open_array(path, mode="r")[...]
                    times["zarr-python 64"].append(time.perf_counter() - start)
                assert np.array_equal(image, data), "zarr-python: wrong pixels"
    median = {name: statistics.median(values) for name, values in times.items()}
    chunks = "16 shards of 16 zstd chunks" if sharded else "256 zstd chunks"
    print(f"{kind}: whole image 4096 x 4096 uint16, {chunks}, {delay_ms:g} ms per request, "
          f"median of {rounds}")
    for name, value in median.items():
        print(f"  {name:<16} {value:7.2f} s")
    print(f"  zarrfuse / zarr-python 64: {median['zarrfuse'] / median['zarr-python 64']:.1f}x "
          f"(floor: 1.2x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sharded", action="store_true",
                        help="the issue's data set (b): shards of 1024 x 1024, inner chunks "
                        "of 256 x 256 (16 shards, 256 inner chunks)")
    parser.add_argument("--s3", action="store_true",
                        help="the whole-image rows on S3 (moto) rather than nginx")
    parser.add_argument("--azure", action="store_true",
                        help="the whole-image rows on Azure (Azurite) rather than nginx")
    parser.add_argument("--gcs", action="store_true",
                        help="the whole-image rows on GCS (fake-gcs-server) rather than nginx")
    parser.add_argument("--copy", action="store_true",
                        help="issue 32 point 5: cp -r of 64 chunk files beside rclone")
    parser.add_argument("--first-paint", action="store_true",
                        help="issue 32 point 4: header and first tile of (a), (b) and a "
                        "100,000 x 100,000 image, on fresh mounts")
    args = parser.parse_args()
    import zarr  # noqa: PLC0415

    work = Path(tempfile.mkdtemp(prefix="zarrfuse-http-pace-"))
    if args.s3 or args.azure or args.gcs:
        data = (np.arange(4096 * 4096, dtype=np.uint32) * 2654435761 % 65521).astype("u2")
        kind = "azure" if args.azure else "gcs" if args.gcs else "s3"
        _object_store_whole_images(kind, work,
                                   data.reshape(4096, 4096), args.sharded, args.delay_ms,
                                   args.rounds)
        return 0
    if args.copy:
        _copies(work, args.delay_ms, args.rounds)
        return 0
    if args.first_paint:
        _first_paints(work, args.delay_ms, args.rounds)
        return 0
    data = (np.arange(4096 * 4096, dtype=np.uint32) * 2654435761 % 65521).astype("u2")
    data = data.reshape(4096, 4096)
    zarr.create_array(work / "www" / "img.zarr", data=data, chunks=(256, 256),
                      shards=(1024, 1024) if args.sharded else None)
    times: dict[str, list[float]] = {"zarrfuse": [], "zarr-python": [], "zarr-python 64": []}
    requests: list[tuple[int, int]] = []
    python_requests: list[tuple[int, int]] = []
    with nginx(work / "www", work / "nginx") as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), args.delay_ms / 2000) as proxy:
        for round_ in range(args.rounds):  # interleaved: the machine's noise hits all alike
            took, heads, gets = _zarrfuse(proxy.url, work / f"mnt{round_}", data,
                                          work / "nginx" / "access.log")
            times["zarrfuse"].append(took)
            requests.append((heads, gets))
            times["zarr-python"].append(_zarr_python(proxy.url, data, None))
            log = work / "nginx" / "access.log"
            before = log.read_text().count("\n")
            times["zarr-python 64"].append(_zarr_python(proxy.url, data, 64))
            lines = [line for line in log.read_text().splitlines()[before:]
                     if "/img.zarr/c/" in line]
            python_requests.append((sum('"HEAD ' in line for line in lines),
                                    sum('"GET ' in line for line in lines)))
    median = {name: statistics.median(values) for name, values in times.items()}
    chunks = "16 shards of 16 zstd chunks" if args.sharded else "256 zstd chunks"
    print(f"whole image 4096 x 4096 uint16, {chunks}, {args.delay_ms:g} ms per request, "
          f"median of {args.rounds}")
    for name, value in median.items():
        print(f"  {name:<16} {value:7.2f} s")
    print(f"  zarrfuse / zarr-python (default concurrency): "
          f"{median['zarrfuse'] / median['zarr-python']:.1f}x; / concurrency 64: "
          f"{median['zarrfuse'] / median['zarr-python 64']:.1f}x (floor: 1.2x)")
    print(f"  zarrfuse chunk requests per pass (HEAD, GET): {requests}")
    print(f"  zarr-python chunk requests, concurrency 64 (HEAD, GET): {python_requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
