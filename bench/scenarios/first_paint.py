"""A viewer's first paint right after a mount (issue 32 point 4, issue 55 point 3): on a
fresh ``--read-only --format ome-tiff`` mount of a web server 50 ms away, the header
through tifffile, then the first tile's ``pread``, of (a) a 4096 x 4096 image in 256
chunks, (b) the same in 16 shards and (c) a 100,000 x 100,000 image (``--quick``: 1024 and
20,000). Floor: <= 0.25 s, four round trips (issue 55). Also the chunk requests nginx saw
(read-ahead included)."""

from __future__ import annotations

import zarr

from bench.data import image_data, make_slide
from bench.harness import Context, Row, at_most
from bench.remote import DelayProxy, NginxLog, requests_text
from bench.scenarios.whole_image import first_tile

ISSUE = "55"
DELAY_MS = 50.0


def measure(ctx: Context) -> list[Row]:
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
    asked: dict[str, str] = {}

    def paint(name: str, url: str) -> float:
        m = ctx.mount(f"{url}/{name}.zarr", ctx.work / "mnt", "--read-only", "--format",
                      "ome-tiff")
        try:
            log.mark()
            took = first_tile(m.where / f"{name}.ome.tif")
            asked[name] = requests_text(log.since(f"/{name}.zarr/c/")[0])
            return took
        finally:
            ctx.unmount(m)

    with nginx(www, ctx.work / "nginx") as url, \
            DelayProxy(int(url.rsplit(":", 1)[1]), DELAY_MS / 2000) as proxy:
        got = ctx.interleave({name: lambda name=name: paint(name, proxy.url) for name in sets})
    trip = DELAY_MS / 1000
    return [Row(f"first paint of {label}, web server, {DELAY_MS:g} ms a request: "
                f"{(Row.median(got[name]) or 0) / trip:.1f} round trips (chunk requests of the "
                f"last round: {asked.get(name, 'none')})", "s", got[name],
                bound=("3 round trips, computed", [3 * trip]), floor=at_most(0.25, absolute=True))
            for name, label in sets.items()]
