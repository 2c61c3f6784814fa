"""Remote stores on loopback for the scenarios: a proxy that adds a round trip's delay,
object stores (moto's S3 in this process, Azurite), nginx's request counts, and how rclone
and s3fs mount the same objects."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.s3server import CREDENTIALS, S3Server


class DelayProxy:
    """A TCP proxy on loopback that delivers every piece of data ``delay`` seconds after it
    arrived, in each direction (order kept, throughput not capped): ``delay_ms / 2000`` adds
    ``delay_ms`` to every request's round trip."""

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
        async def stop() -> None:  # every connection's pumps ended, then the loop
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(10)

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


class NginxLog:
    """What nginx was asked since ``mark()``, from its access log: requests by method whose
    path holds ``part``, and body bytes sent."""

    def __init__(self, log: Path) -> None:
        self.log, self._seen = log, 0

    def mark(self) -> None:
        self._seen = self.log.read_text().count("\n")

    def since(self, part: str = "/c/") -> tuple[Counter[str], int]:
        counts: Counter[str] = Counter()
        sent = 0
        for line in self.log.read_text().splitlines()[self._seen :]:
            request, status = line.split('"')[1], line.split('"')[2].split()
            if part in request:
                counts[request.split()[0]] += 1
            sent += int(status[1])
        return counts, sent


def requests_text(counts: Counter[str]) -> str:
    order = ("LIST", "HEAD", "GET")
    parts = [f"{counts[k]} {k}" for k in order if counts[k]]
    return ", ".join(parts + [f"{n} {k}" for k, n in sorted(counts.items()) if k not in order])


@contextlib.contextmanager
def s3_bucket(bucket: str) -> Iterator[S3Server]:
    """moto's S3 on loopback (counting requests) with ``bucket`` made; credentials set."""
    import boto3  # noqa: PLC0415  (the test extra, only for the S3 scenarios)

    os.environ.update(CREDENTIALS)
    with S3Server() as server:
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=bucket)
        yield server


@dataclass
class Remote:
    """An object store on loopback: the URL of ``img.zarr`` in its bucket, its port, the
    storage options that reach it at a given endpoint, and its request counts (S3: by method
    since ``reset``; Azure: none kept)."""

    url: str
    port: int
    options: Callable[[str], dict]
    reset: Callable[[], None] = lambda: None
    counts: Callable[[], Counter[str]] = Counter
    seed: Callable[[Path, str], None] | None = None
    """How an array made in a local folder reaches the store under a name (GCS: the emulator
    takes no plain PUT); ``None``: written through zarrfuse at ``url``."""


@contextlib.contextmanager
def object_store(kind: str, work: Path) -> Iterator[Remote]:
    """A bucket or container ``pace`` on moto (``s3``), fake-gcs-server (``gcs``) or Azurite
    (``azure``)."""
    if kind == "s3":
        with s3_bucket("pace") as server:
            yield Remote("s3://pace/img.zarr", server.port, lambda at: {"endpoint_url": at},
                         server.reset, lambda: server.snapshot()[0])
        return
    if kind == "gcs":
        from tests.gcsserver import fake_gcs  # noqa: PLC0415  (the test extra's emulator)

        (work / "gcs").mkdir()
        with fake_gcs(work / "gcs") as emulator:
            emulator.create_bucket("pace")
            since = [0]
            yield Remote(
                "gs://pace/img.zarr", int(emulator.url.rsplit(":", 1)[1]),
                lambda at: {**emulator.storage_options, "endpoint_url": at},
                lambda: since.__setitem__(0, len(emulator.requests())),
                lambda: emulator.counts(since[0]),
                lambda folder, name: emulator.upload_tree(folder, "pace", name))
        return
    from tests.azurite import ACCOUNT, KEY, azurite  # noqa: PLC0415  (Node.js, Azure only)

    with azurite(work / "azurite") as emulator:
        emulator.create_container("pace")
        port = int(emulator.endpoint.split(":")[2].split("/")[0])
        yield Remote("az://pace/img.zarr", port, lambda at: {
            "account_name": ACCOUNT, "account_key": KEY,
            "endpoint_url": f"{at}/{ACCOUNT}" if at.count("/") == 2 else at})


def rclone_s3(bucket: str, endpoint: str, where: Path, *flags: str
              ) -> tuple[list[str], dict[str, str | None]]:
    """``rclone mount`` of an S3 bucket read-only (argv, env): configured by variables;
    ``--use-server-modtime``, or it asks each file's metadata while listing."""
    env: dict[str, str | None] = {
           "RCLONE_CONFIG_ZF_TYPE": "s3", "RCLONE_CONFIG_ZF_PROVIDER": "Other",
           "RCLONE_CONFIG_ZF_ENDPOINT": endpoint, "RCLONE_CONFIG_ZF_REGION": "us-east-1",
           "RCLONE_CONFIG_ZF_ACCESS_KEY_ID": CREDENTIALS["AWS_ACCESS_KEY_ID"],
           "RCLONE_CONFIG_ZF_SECRET_ACCESS_KEY": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
           "RCLONE_CONFIG_ZF_FORCE_PATH_STYLE": "true",
           "AWS_CA_BUNDLE": None}  # rclone cannot take one on plain http (and needs none)
    return (["rclone", "mount", f"zf:{bucket}", str(where), "--read-only",
             "--use-server-modtime", "--config", str(where.parent / "rclone.conf"), *flags],
            env)


def rclone_http(url: str, where: Path) -> list[str]:
    """``rclone mount`` of a web server's directory (its HTML listing), read-only."""
    return ["rclone", "mount", ":http:", str(where), "--http-url", url, "--read-only",
            "--vfs-cache-mode", "full", "--cache-dir", str(where.parent / f"{where.name}-cache")]


def s3fs(bucket: str, endpoint: str, where: Path) -> list[str]:
    """s3fs-fuse of a bucket, read-only, in the foreground (its defaults otherwise)."""
    passwd = where.parent / "s3fs.passwd"
    passwd.write_text(f"{CREDENTIALS['AWS_ACCESS_KEY_ID']}:"
                      f"{CREDENTIALS['AWS_SECRET_ACCESS_KEY']}\n")
    passwd.chmod(0o600)
    return ["s3fs", bucket, str(where), "-f", "-o",
            f"url={endpoint},use_path_request_style,passwd_file={passwd},ro"]
