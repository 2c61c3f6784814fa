"""Bounded memory (issue 24, point 6): reading a remote whole image end to end keeps the
daemon's RSS under its configured caches plus 300 MB. The 100k x 100k run is
``python -m bench run memory``; here a 20k x 20k image (400 MB of tiles) on the same path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import zarrfuse
from tests.mounting import daemon_pid, mounted
from tests.s3server import S3Server, server_with_bucket

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

BUCKET = "memory"
CACHE_MB = 64


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as s3:
        yield s3


def _status_bytes(pid: int, field: str) -> int:
    """A memory figure of /proc/PID/status (VmHWM: the peak RSS; VmRSS: now), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _peak_rss(pid: int) -> int:
    return _status_bytes(pid, "VmHWM")


def test_reading_a_remote_whole_image_end_to_end_stays_under_the_caches_plus_300_mb(
    server, tmp_path
):
    url = f"s3://{BUCKET}/slide"
    side, chunk = 20_000, 1024
    array = zarrfuse.create_array(url, shape=(side, side), chunks=(chunk, chunk), dtype="u1",
                                  fill_value=0, storage_options={"endpoint_url": server.url})
    band = np.random.default_rng(8).integers(1, 255, (chunk, side), dtype="u1")
    array[:chunk, :] = band  # one stored row of chunks, the rest absent
    with mounted(url, tmp_path / "mnt", "--format", "ome-tiff", "--cache-mb", str(CACHE_MB),
                 "--storage-option", f"endpoint_url={server.url}") as mnt:
        image = mnt / "slide.ome.tif"
        total, buffer = 0, bytearray(1 << 20)
        with open(image, "rb", buffering=0) as f:
            while n := f.readinto(buffer):
                total += n
        assert total == image.stat().st_size > side * side
        peak = _peak_rss(daemon_pid(mnt))
    assert peak < (CACHE_MB << 20) + 300_000_000, f"peak RSS {peak / 1e6:.0f} MB"


def _rss(pid: int) -> int:
    return _status_bytes(pid, "VmRSS")


def test_memory_returns_after_a_large_scratch_file_goes(tmp_path):
    """Issue 34 point 4: the daemon kept 578 MB after a 512 MiB scratch file was removed
    (it keeps freed heap memory for reuse); now it gives a large file's memory back."""
    zarrfuse.create_array(tmp_path / "a", shape=(4,), chunks=(4,), dtype="u1")
    big = tmp_path / "big"
    big.write_bytes(np.random.default_rng(0).integers(0, 255, 200 << 20, dtype="u1"))
    with mounted(tmp_path / "a", tmp_path / "mnt") as mnt:
        pid = daemon_pid(mnt)
        before = _rss(pid)
        (mnt / ".big.tmp").write_bytes(big.read_bytes())  # a scratch file, held in memory
        assert _rss(pid) > before + (150 << 20)
        (mnt / ".big.tmp").unlink()
        assert _rss(pid) < before + (50 << 20)
