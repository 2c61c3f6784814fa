"""A viewer's first paint on a fresh mount (issue 55 point 3), counted at the store: on a web
server (nginx) the header through tifffile asks nothing (the kernel's read-ahead of it reaches
no tile) and the centre tile asks its own chunk; on S3 (moto) a whole image's ancestor, read
at mount for OME-Zarr levels, has its four v2 documents asked at once (one round trip)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
import tifffile
import zarr

import zarrfuse
from tests.http_servers import nginx
from tests.mounting import mounted
from tests.s3server import CREDENTIALS, S3Server, aws_environment
from zarrfuse.api.nodes import V2_NAMES
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import build_filesystem

pytestmark = pytest.mark.timeout(120)

SIDE, CHUNK = 2048, 256  # 8 MiB of tiles, a tile per chunk

BUCKET = "zarrfuse-first-paint"
HELD = 5.0
"""Seconds a held request waits for the others of its round (a failing test, not a hang)."""


class RoundServer(S3Server):
    """moto that holds each GET of ``keys`` until all of them have arrived: asked at once,
    they pass together; asked one after another, each waits ``HELD`` and ``together`` is
    False."""

    def __init__(self, keys: set[str]) -> None:
        super().__init__()
        self.keys, self.together = keys, True
        self._arrived: set[str] = set()
        self._round = threading.Condition()

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if environ["REQUEST_METHOD"] == "GET" and path in self.keys:
            with self._round:
                self._arrived.add(path)
                self._round.notify_all()
                if not self._round.wait_for(lambda: self._arrived >= self.keys, HELD):
                    self.together = False
        return super()._wsgi(environ, start_response)


@pytest.fixture
def s3() -> Iterator[RoundServer]:
    with aws_environment(CREDENTIALS), RoundServer(
            {f"/{BUCKET}/slides/{name}" for name in V2_NAMES}) as server:
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=BUCKET)
        yield server


def test_an_ancestors_v2_documents_are_asked_in_one_round_trip(s3):
    source = f"s3://{BUCKET}/slides/a"
    options = {"endpoint_url": s3.url}
    zarrfuse.create_array(source, data=np.arange(64 * 64, dtype="u2").reshape(64, 64),
                          chunks=(32, 32), storage_options=options)
    client = boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1")
    for parent in ("slides/", ""):  # zarr made them groups: an array uploaded on its own
        client.delete_object(Bucket=BUCKET, Key=f"{parent}zarr.json")
    s3.reset()
    fs, kind = build_filesystem(MountConfig(source=source, mountpoint="/nonexistent",
                                            read_only=True, format="ome-tiff",
                                            storage_options=options))
    try:
        assert kind == "image"
        counts, _ = s3.snapshot()
        # zarr.json of the array, then of each ancestor (absent) and its v2 documents
        assert s3.per_key["GET", f"{BUCKET}/slides/.zarray"] == 1, s3.per_key
        assert s3.together, "slides/'s v2 documents were asked one after another"
        assert counts["GET"] == 1 + 2 * (1 + len(V2_NAMES)) and counts["HEAD"] == 0, counts
    finally:
        fs.namespace.catalog.context.close()


def _chunk_requests(log: Path, seen: int, until: str | None = None) -> list[str]:
    """The chunk requests nginx logged after its first ``seen`` lines; ``until``: waits (at
    most 10 s) for a request naming it, as nginx logs a request once its answer is sent."""
    deadline = time.monotonic() + 10
    while True:
        lines = [line.split('"')[1] for line in log.read_text().splitlines()[seen:]]
        if until is None or any(until in line for line in lines) or (
                time.monotonic() > deadline):
            return [line for line in lines if "/img.zarr/c/" in line]
        time.sleep(0.01)


@pytest.mark.fuse
def test_a_first_paint_on_a_web_server_asks_only_the_tile_it_shows(tmp_path):
    data = (np.arange(SIDE * SIDE, dtype=np.uint32) % 65521).astype("u2").reshape(SIDE, SIDE)
    zarr.create_array(tmp_path / "www" / "img.zarr", data=data, chunks=(CHUNK, CHUNK))
    log, centre = tmp_path / "nginx" / "access.log", SIDE // CHUNK // 2
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, mounted(
            f"{url}/img.zarr", tmp_path / "mnt", "--read-only", "--format", "ome-tiff") as mnt:
        seen = log.read_text().count("\n")
        with tifffile.TiffFile(mnt / "img.ome.tif") as tif:
            page = tif.pages[0]
            index = centre * (SIDE // page.tilewidth) + centre
            at, n = int(page.dataoffsets[index]), int(page.databytecounts[index])
        assert _chunk_requests(log, seen) == []  # the header is computed, no tile read
        with open(mnt / "img.ome.tif", "rb", buffering=0) as f:
            tile = np.frombuffer(os.pread(f.fileno(), n, at), "<u2")
        box = slice(centre * CHUNK, (centre + 1) * CHUNK)
        np.testing.assert_array_equal(tile.reshape(CHUNK, CHUNK), data[box, box])
        asked = _chunk_requests(log, seen, f"/img.zarr/c/{centre}/{centre} ")
    # its own chunk, and at most the kernel's read-ahead along its row: nothing before it
    assert f"GET /img.zarr/c/{centre}/{centre} HTTP/1.1" in asked, asked
    assert all(r.startswith(f"GET /img.zarr/c/{centre}/") for r in asked), asked
