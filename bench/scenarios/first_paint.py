"""A viewer's first paint right after a mount (issue 32 point 4, issue 55 point 3): on a
fresh ``--read-only --format ome-tiff`` mount of a web server and of an S3 bucket (moto)
50 ms away, the header through tifffile, then the centre tile's ``pread`` (as issue 55
measured it), of (a) a 4096 x 4096 image in 256 chunks, (b) the same in 16 shards and (c) a
100,000 x 100,000 image (``--quick``: 1024 and 20,000). Floor: <= 0.25 s, four round trips
(issue 55). Also the requests the store saw for the chunks (read-ahead included)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import zarr

from bench.data import image_data, make_slide
from bench.harness import Context, Row, at_most
from bench.remote import DelayProxy, NginxLog, requests_text, s3_bucket
from bench.scenarios.whole_image import first_tile

ISSUE = "55"
DELAY_MS = 50.0
BUCKET = "paint"


def measure(ctx: Context) -> list[Row]:
    import boto3  # noqa: PLC0415  (the test extra, only for the S3 scenarios)

    from tests.http_servers import nginx  # noqa: PLC0415  (the web server's scenarios)

    side, slide = ctx.pick(4096, 1024), ctx.pick(100_000, 20_000)
    www = ctx.work / "www"
    data = image_data(side)
    zarr.create_array(www / "a.zarr", data=data, chunks=(256, 256))
    zarr.create_array(www / "b.zarr", data=data, chunks=(256, 256), shards=(1024, 1024))
    make_slide(www / "c.zarr", slide)
    sets = {"a": f"(a) {(side // 256) ** 2} chunks", "b": f"(b) {(side // 1024) ** 2} shards",
            "c": f"(c) {slide:,}^2"}
    log = NginxLog(ctx.work / "nginx" / "access.log")
    asked: dict[tuple[str, str], str] = {}

    def paint(store: str, name: str, source: str, since: Callable[[], Counter[str]],
              *options: str) -> float:
        m = ctx.mount(source, ctx.work / "mnt", "--read-only", "--format", "ome-tiff",
                      *options)
        try:
            since()  # from here
            took = first_tile(m.where / f"{name}.ome.tif", centre=True)
            asked[store, name] = requests_text(since())
            return took
        finally:
            ctx.unmount(m)

    def nginx_since() -> Counter[str]:
        counts = log.since("/c/")[0]
        log.mark()
        return counts

    got: dict[str, dict[str, list[float]]] = {}
    with nginx(www, ctx.work / "nginx") as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), DELAY_MS / 2000) as proxy:
        got["web server"] = ctx.interleave({name: lambda name=name: paint(
            "web server", name, f"{proxy.url}/{name}.zarr", nginx_since) for name in sets})
    with s3_bucket(BUCKET) as server, DelayProxy(server.port, DELAY_MS / 2000) as proxy:
        s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
        for path in sorted(p for p in www.rglob("*") if p.is_file()):
            s3.upload_file(str(path), BUCKET, path.relative_to(www).as_posix())

        def s3_since() -> Counter[str]:
            counts = server.snapshot()[0]
            server.reset()
            return counts

        got["S3"] = ctx.interleave({name: lambda name=name: paint(
            "S3", name, f"s3://{BUCKET}/{name}.zarr", s3_since,
            f"--storage-option=endpoint_url={proxy.url}") for name in sets})
    trip = DELAY_MS / 1000
    return [Row(f"first paint (centre tile) of {label}, {store}, {DELAY_MS:g} ms a request: "
                f"{(Row.median(got[store][name]) or 0) / trip:.1f} round trips (requests of "
                f"the last round: {asked.get((store, name), 'none')})", "s", got[store][name],
                bound=("3 round trips, computed", [3 * trip]), floor=at_most(0.25, absolute=True))
            for store in got for name, label in sets.items()]
