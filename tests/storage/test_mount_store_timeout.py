"""A hung store never holds a request past ``--store-timeout`` (issue 21, point 9): lookups,
listings, stats, opens and reads get EIO at the deadline, the daemon keeps answering, and once
the server answers again the same files read exact (nothing from the hung calls was kept).

The S3 server (moto) sits behind a proxy on loopback that can stall: it accepts connections
and holds every byte, as a stuck endpoint does.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest

import zarrfuse
from tests.deadlines import answered
from tests.mounting import ZARRFUSE, MountClock, mounted, run_with_timeout, wait_for
from tests.s3server import CREDENTIALS, S3Server, aws_environment
from tests.stall_proxy import StallProxy

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(240)]

BUCKET = "hung"
TIMEOUT = 2.0
SAID = "within {:g} s (--store-timeout)"
"""How the daemon's log line for a request cut at the timeout names it (the adapter's cut,
or the store client's own at the same bound)."""


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with aws_environment(CREDENTIALS), S3Server() as server:
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=BUCKET)
        yield server


@pytest.fixture(scope="module")
def proxy(s3: S3Server) -> Iterator[StallProxy]:
    with StallProxy(s3.port) as stalling:
        yield stalling


def _failure(fn, what: str) -> OSError | None:
    """The error ``fn()`` raised (None if none), failing the test if it never returns: the
    store stalls until resumed, so only the daemon's bound answers (the hang guard is far
    above it; how long the answer took is checked in virtual time by
    tests/adapter/test_request_errors.py)."""
    try:
        answered(fn, what)
    except OSError as e:
        return e
    return None


def _said(log: Path, text: str) -> list[str]:
    """The daemon's log lines that say ``text``, in order."""
    return [line for line in log.read_text().splitlines() if text in line]


def _levels(lines: list[str]) -> list[str]:
    return [line.split(" ", 3)[2] for line in lines]


def test_a_hung_store_gets_eio_within_the_timeout_and_the_mount_recovers(proxy, tmp_path,
                                                                          monkeypatch):
    clock = MountClock(monkeypatch, tmp_path)
    url = f"s3://{BUCKET}/a"
    data = np.random.default_rng(9).integers(0, 255, (4, 4, 1024), dtype="u1")
    zarrfuse.create_array(url, data=data, chunks=(1, 1, 1024), compressors=None,
                          storage_options={"endpoint_url": proxy.url})
    log = tmp_path / "daemon.log"
    with mounted(url, tmp_path / "mnt", "--read-only", "--store-timeout", str(TIMEOUT),
                 "--metadata-ttl", "0.2", "--layout", "source", "--log-file", str(log),
                 "--storage-option", f"endpoint_url={proxy.url}") as mnt:
        first = mnt / "c" / "0" / "0" / "0"
        assert first.read_bytes() == data[0, 0].tobytes()
        clock.ahead(1)  # past the listing TTL: the next lookups ask the store
        proxy.stall()
        try:
            for what, attempt in (
                ("a read", lambda: (mnt / "c" / "1" / "1" / "0").read_bytes()),  # lookup...
                ("a listing", lambda: os.listdir(mnt / "c" / "2")),
                ("a stat", lambda: (mnt / "c" / "3" / "2" / "0").stat()),
            ):
                error = _failure(attempt, what)
                assert error is not None and error.errno == errno.EIO, (what, error)
            # The daemon still answers what needs no store.
            assert run_with_timeout(["stat", mnt]).returncode == 0
        finally:
            proxy.resume()
        said = _said(log, SAID.format(TIMEOUT))
        assert _levels(said)[:1] == ["WARNING"], said
        clock.ahead(1)
        for i, j, k in ((1, 1, 0), (2, 3, 0), (3, 2, 0)):  # nothing wrong was kept
            assert (mnt / "c" / str(i) / str(j) / str(k)).read_bytes() == data[i, j].tobytes()
        assert sorted(os.listdir(mnt / "c" / "2")) == ["0", "1", "2", "3"]


def test_a_stalled_store_fails_a_tools_next_calls_fast(proxy, tmp_path, monkeypatch):
    """Issue 34 point 5: a ``cp`` during a freeze waited 90 s, three lookups of 30 s each.
    After one request found no answer within the timeout, the next ones that need the store
    answer EIO within a second, until the store answers again."""
    clock = MountClock(monkeypatch, tmp_path)
    timeout = 6.0
    url = f"s3://{BUCKET}/b"
    data = np.random.default_rng(3).integers(0, 255, (4, 1024), dtype="u1")
    zarrfuse.create_array(url, data=data, chunks=(1, 1024), compressors=None,
                          storage_options={"endpoint_url": proxy.url})
    log = tmp_path / "daemon.log"
    with mounted(url, tmp_path / "mnt", "--read-only", "--store-timeout", str(timeout),
                 "--metadata-ttl", "0.2", "--layout", "source", "--log-file", str(log),
                 "--debug", "--storage-option", f"endpoint_url={proxy.url}") as mnt:
        clock.ahead(1)
        proxy.stall()
        try:
            errors = [_failure(lambda i=i: (mnt / "c" / str(i) / "0").read_bytes(), f"read {i}")
                      for i in (1, 2, 3)]
        finally:
            proxy.resume()
        assert all(error is not None and error.errno == errno.EIO for error in errors), errors
        # The first request waited the whole timeout (one WARNING); every later one found
        # the store stalled, was given STALLED_WAIT instead, and said so at DEBUG only.
        said = _said(log, SAID.format(timeout))
        levels = _levels(said)
        assert levels[:1] == ["WARNING"] and len(levels) >= 3, said
        assert set(levels[1:]) == {"DEBUG"}, said
        clock.ahead(1)
        assert (mnt / "c" / "2" / "0").read_bytes() == data[2].tobytes()  # answered again


def test_store_timeout_must_be_positive(tmp_path):
    result = run_with_timeout([*ZARRFUSE, "mount", tmp_path, tmp_path / "m",
                               "--store-timeout", "0"], check=False)
    assert result.returncode == 2 and "above 0" in result.stderr


def _close_answered_eio_in_time(s3: S3Server, proxy: StallProxy, path, data: bytes,
                                log: Path) -> None:
    """Write ``data`` over ``path`` and close it while the store is stalled: the close is
    answered EIO, because the write's signed URL expired (its time is ``--store-timeout``,
    handed to the daemon; the hang guard is far above it); then the held PUT reaches the
    server, which refuses it."""
    with open(path, "r+b") as f:
        f.write(data)
        s3.reset()
        proxy.stall()
        try:
            error = _failure(f.close, "a close while the store stalls")
        finally:
            proxy.resume()
    assert error is not None and error.errno == errno.EIO, error
    assert _said(log, "the store will not take it"), log.read_text()
    assert wait_for(lambda: s3.counts["EXPIRED"] >= 1, 30), s3.counts  # the held PUT came
    assert s3.snapshot()[0]["PUT"] == 0  # and nothing else stored it


def _stored(proxy: StallProxy, key: str) -> bytes:
    client = boto3.client("s3", endpoint_url=proxy.url, region_name="us-east-1")
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def test_a_close_answered_eio_never_lands_later(s3, proxy, tmp_path):
    """Issue 34 point 5: a close whose PUT the hung store holds is answered EIO within the
    timeout, and once the store lets the PUT through, it is refused there (its signed URL
    has expired): the chunk stays what it was, and the mount reads that."""
    url = f"s3://{BUCKET}/w"
    data = np.random.default_rng(5).integers(0, 255, (2, 1024), dtype="u1")
    zarrfuse.create_array(url, data=data, chunks=(1, 1024), compressors=None,
                          storage_options={"endpoint_url": proxy.url})
    log = tmp_path / "daemon.log"
    with mounted(url, tmp_path / "mnt", "--store-timeout", str(TIMEOUT), "--layout", "source",
                 "--log-file", str(log),
                 "--storage-option", f"endpoint_url={proxy.url}") as mnt:
        chunk = mnt / "c" / "1" / "0"
        _close_answered_eio_in_time(s3, proxy, chunk, bytes(1024), log)
        assert _stored(proxy, "w/c/1/0") == data[1].tobytes()
        assert chunk.read_bytes() == data[1].tobytes()


def test_a_rendered_close_answered_eio_never_lands_later(s3, proxy, tmp_path):
    """The same through a ``--format tiff`` view, whose writes zarr encodes: its PUT goes
    through the mount's backend too (signed, bounded)."""
    url = f"s3://{BUCKET}/rendered"
    data = np.stack([np.full(1024, 7, "u1"), np.full(1024, 9, "u1")])
    zarrfuse.create_array(url, data=data, chunks=(1, 1024), compressors=None,
                          storage_options={"endpoint_url": proxy.url})
    log = tmp_path / "daemon.log"
    with mounted(url, tmp_path / "mnt", "--store-timeout", str(TIMEOUT), "--format", "tiff",
                 "--log-file", str(log),
                 "--storage-option", f"endpoint_url={proxy.url}") as mnt:
        first, second = sorted(mnt.rglob("*.tiff"))
        picture = first.read_bytes()  # a valid TIFF of the chunk's shape, other values
        _close_answered_eio_in_time(s3, proxy, second, picture, log)
        assert _stored(proxy, "rendered/c/1/0") == data[1].tobytes()
