"""A whole image from a remote store 50 ms away (issue 32; GCS: issue 55 point 4): a 4096 x 4096
uint16 image (``--quick``: 1024 x 1024) as (a) 256 x 256 zstd chunks and (b) the same in
1024 x 1024 shards, served by nginx (``pace-http``), moto's S3 (``pace-s3``), fake-gcs-server
(``pace-gcs``) or Azurite (``pace-azure``) behind a proxy adding 50 ms to every request, read
as ``tifffile.imread`` of a fresh ``--format ome-tiff`` mount, beside zarr-python reading the
same URL in process at concurrency 64 (and, on the web server, its default). Every pixel
checked. Floor: zarrfuse <= 1.2x zarr-python's time. Also the chunk requests the server saw
per read."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np
import tifffile
import zarr

from bench.data import image_data
from bench.harness import Context, Row, at_most, seconds
from bench.remote import DelayProxy, NginxLog, object_store, requests_text

ISSUE = "32"
DELAY_MS = 50.0


@contextlib.contextmanager
def served(ctx: Context, store: str, data: np.ndarray
           ) -> Iterator[tuple[Callable[[str], str], list[str], Callable[[str], dict],
                               Callable[[], None], Callable[[], Counter[str]]]]:
    """The two arrays on ``store`` behind the proxy: (the URL of an array, zarrfuse's options,
    zarr-python's storage options, a mark, the chunk requests since it)."""
    if store == "http":
        from tests.http_servers import nginx  # noqa: PLC0415  (the web server's scenarios)

        for name, shards in (("a", None), ("b", 1024)):
            zarr.create_array(ctx.work / "www" / f"{name}.zarr", data=data, chunks=(256, 256),
                              shards=(shards, shards) if shards else None)
        log = NginxLog(ctx.work / "nginx" / "access.log")
        with nginx(ctx.work / "www", ctx.work / "nginx") as url, \
                DelayProxy(int(url.rsplit(":", 1)[1]), DELAY_MS / 2000) as proxy:
            yield (lambda name: f"{proxy.url}/{name}.zarr", [], lambda _: {}, log.mark,
                   lambda: log.since("/c/")[0])
        return
    import zarrfuse  # noqa: PLC0415  (object stores only: their arrays are written through it)

    with object_store(store, ctx.work) as remote:
        for name, shards in (("a", None), ("b", 1024)):
            layout = {"data": data, "chunks": (256, 256),
                      "shards": (shards, shards) if shards else None}
            if remote.seed is None:
                zarrfuse.create_array(remote.url.replace("img", name), **layout,
                                      storage_options=remote.options(
                                          f"http://127.0.0.1:{remote.port}"))
            else:
                zarr.create_array(ctx.work / f"{name}.zarr", **layout)
                remote.seed(ctx.work / f"{name}.zarr", f"{name}.zarr")
        with DelayProxy(remote.port, DELAY_MS / 2000) as proxy:
            yield (lambda name: remote.url.replace("img", name),
                   [f"--storage-option={k}={v}" for k, v in remote.options(proxy.url).items()],
                   lambda _: remote.options(proxy.url), remote.reset, remote.counts)


def measure(ctx: Context, store: str = "http") -> list[Row]:
    side = ctx.pick(4096, 1024)
    data = image_data(side)
    rows: list[Row] = []
    with served(ctx, store, data) as how:
        for name, label in (("a", f"(a) {(side // 256) ** 2} chunks"),
                            ("b", f"(b) {(side // 1024) ** 2} shards")):
            rows += one_array(ctx, store, name, f"whole image {label}, {store}, "
                              f"{DELAY_MS:g} ms a request", data, *how)
    return rows


def one_array(ctx: Context, store: str, name: str, what: str, data: np.ndarray,
              url: Callable[[str], str], options: list[str], storage: Callable[[str], dict],
              mark: Callable[[], None], asked: Callable[[], Counter[str]]) -> list[Row]:
    from zarrfuse.api.arrays import open_store_path  # noqa: PLC0415  (zarrfuse's URL opener)
    from zarrfuse.zarr_compat import sync  # noqa: PLC0415  (the same)

    counts: dict[str, Counter[str]] = {}

    def zarrfuse_read() -> float:
        m = ctx.mount(url(name), ctx.work / "mnt", "--read-only", "--format", "ome-tiff",
                      *options)
        try:
            mark()
            image: list[np.ndarray] = []
            took = seconds(lambda: image.append(tifffile.imread(m.where / f"{name}.ome.tif")))
            counts["zarrfuse"] = asked()
        finally:
            ctx.unmount(m)
        if not np.array_equal(image[0], data):
            raise RuntimeError("zarrfuse: wrong pixels")
        return took

    def python_read(concurrency: int | None) -> float:
        settings = {} if concurrency is None else {"async.concurrency": concurrency}
        with zarr.config.set(settings):
            path = sync(open_store_path(url(name), mode="r",
                                        storage_options=storage(name) or None))
            mark()
            image: list[np.ndarray] = []
            took = seconds(lambda: image.append(zarr.open_array(path, mode="r")[...]))
            counts[f"zarr-python {concurrency}"] = asked()
        if not np.array_equal(image[0], data):
            raise RuntimeError("zarr-python: wrong pixels")
        return took

    contenders = {"zarrfuse": zarrfuse_read, "zarr-python 64": lambda: python_read(64)}
    if store == "http":
        contenders["zarr-python default"] = lambda: python_read(None)
    got = ctx.interleave(contenders)
    rows = [Row(what, "s", got["zarrfuse"], ("zarr-python, concurrency 64",
                                             got["zarr-python 64"]), floor=at_most(1.2))]
    if store == "http":
        rows.append(Row(what, "s", got["zarrfuse"], ("zarr-python, its default",
                                                     got["zarr-python default"])))
    ours, theirs = counts.get("zarrfuse", Counter()), counts.get("zarr-python 64", Counter())
    if store != "azure":
        kind = "chunk requests" if store == "http" else "requests (all keys)"
        rows.append(Row(f"{what}: {kind} of the last round (zarrfuse "
                        f"{requests_text(ours)}; zarr-python {requests_text(theirs)})",
                        "requests", [sum(ours.values())], ("zarr-python",
                                                           [sum(theirs.values())])))
    return rows
