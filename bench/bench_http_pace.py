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

    .venv/bin/python bench/bench_http_pace.py [--delay-ms 50] [--rounds 3] [--sharded]
    .venv/bin/python bench/bench_http_pace.py --first-paint [--delay-ms 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.bench_latency import DelayProxy  # noqa: E402  (after the sys.path insert above)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sharded", action="store_true",
                        help="the issue's data set (b): shards of 1024 x 1024, inner chunks "
                        "of 256 x 256 (16 shards, 256 inner chunks)")
    parser.add_argument("--first-paint", action="store_true",
                        help="issue 32 point 4: header and first tile of (a), (b) and a "
                        "100,000 x 100,000 image, on fresh mounts")
    args = parser.parse_args()
    import zarr  # noqa: PLC0415

    work = Path(tempfile.mkdtemp(prefix="zarrfuse-http-pace-"))
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
          f"{median['zarrfuse'] / median['zarr-python 64']:.1f}x (floor: 1x)")
    print(f"  zarrfuse chunk requests per pass (HEAD, GET): {requests}")
    print(f"  zarr-python chunk requests, concurrency 64 (HEAD, GET): {python_requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
