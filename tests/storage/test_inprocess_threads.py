"""Every thread a mount starts belongs to it (issue 53 point 5): a busy read of a sharded
array on S3 (moto on loopback) runs in the mount's bounded pools, and when the mount closes
none of them is left behind (the fetch pool was a module global that outlived every mount).
Only trio's own cache of idle worker threads, which no mount owns, may stay a while."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tifffile

import zarrfuse
from tests.inprocess import in_process
from tests.s3server import S3Server, server_with_bucket
from zarrfuse.filesystem.chunks.mount_context import FETCH_THREADS, IO_THREADS, WAITING_THREADS

BUCKET = "threads"
TRIO_DEFAULT = 40
"""trio's own bound (each trio run's): the adapter's kernel invalidations take it."""
EXIT_DEADLINE = 30.0  # seconds for a closed pool's threads to end (a bound, not a wait)


@pytest.fixture
def server() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as s3:
        yield s3


def _trio_worker(thread: threading.Thread) -> bool:
    """trio's cache of worker threads: each runs one ``to_thread`` call at a time, within
    the limiter the call names, and idles a while after."""
    return thread.name.startswith("Trio thread") or "trio" in thread.name.lower()


def test_a_mount_runs_in_bounded_pools_and_leaves_no_thread_behind(server, tmp_path):
    url = f"s3://{BUCKET}/sharded"
    options = {"endpoint_url": server.url}
    data = np.random.default_rng(3).integers(0, 60000, (256, 256)).astype("u2")
    zarrfuse.create_array(url, data=data, chunks=(32, 32), shards=(64, 64),
                          compressors=None, storage_options=options)
    before = set(threading.enumerate())
    peak: set[threading.Thread] = set()
    with in_process(url, format="ome-tiff", read_only=True, storage_options=options) as fs:
        for _ in range(3):  # tiles of 16 shards fetched together on the fetch pool
            image = tifffile.imread(io.BytesIO(fs.read("sharded.ome.tif")))
            np.testing.assert_array_equal(image, data)
            peak |= set(threading.enumerate()) - before
        tiles = sorted(fs.walk())
        assert tiles
    ours = [t for t in peak if not _trio_worker(t)]
    assert any(t.name.startswith("zarrfuse-fetch") for t in ours), sorted(t.name for t in peak)
    assert len([t for t in ours if t.name.startswith("zarrfuse-fetch")]) <= FETCH_THREADS
    bound = IO_THREADS + (os.cpu_count() or 1) + WAITING_THREADS + TRIO_DEFAULT
    assert len(peak) - len(ours) <= bound
    deadline = time.monotonic() + EXIT_DEADLINE
    while (left := [t.name for t in ours if t.is_alive()]) and time.monotonic() < deadline:
        next(t for t in ours if t.is_alive()).join(0.1)
    assert not left, left
