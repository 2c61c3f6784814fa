"""The daemon's memory while a remote whole image is read end to end (issue 24 point 6): a
100,000 x 100,000 uint8 image on moto's S3 (``--quick``: 20,000), 1024 x 1024 zstd chunks,
two rows of chunks stored and the rest absent, mounted ``--format ome-tiff --read-only``
with ``--cache-mb 256`` and its file read from start to end in 1 MiB reads (10 GB). Figure:
the daemon's peak RSS (``VmHWM``); floor: at most the decoded-chunk cache plus 300 MB."""

from __future__ import annotations

import numpy as np

from bench.harness import MB, Context, MiB, Row, at_most, proc_field, read_all
from bench.remote import s3_bucket

ISSUE = "24"
CACHE_MB = 256


def measure(ctx: Context) -> list[Row]:
    import zarrfuse  # noqa: PLC0415  (writes the array to S3)

    side = ctx.pick(100_000, 20_000)
    with s3_bucket("zarrfuse-memory-bench") as server:
        url = "s3://zarrfuse-memory-bench/slide"
        arr = zarrfuse.create_array(url, shape=(side, side), chunks=(1024, 1024), dtype="u1",
                                    fill_value=0, storage_options={"endpoint_url": server.url})
        arr[:2048, :] = np.random.default_rng(6).integers(1, 255, (2048, side), dtype="u1")

        def peak() -> float:
            m = ctx.mount(url, ctx.work / "mnt", "--format", "ome-tiff", "--read-only",
                          "--cache-mb", str(CACHE_MB), "--storage-option",
                          f"endpoint_url={server.url}")
            try:
                [image] = list(m.where.glob("*.ome.tif"))
                read_all([image])
                return proc_field(m.pid, "VmHWM") * 1024 / MB
            finally:
                ctx.unmount(m)

        got = ctx.interleave({"peak": peak})
    bound = (CACHE_MB * MiB + 300 * MB) / MB
    return [Row(f"daemon RSS peak reading a {side:,}^2 uint8 image from S3, --cache-mb "
                f"{CACHE_MB}", "MB", got["peak"], floor=at_most(bound, absolute=True))]
