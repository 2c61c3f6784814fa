"""What S3 is asked for a whole image (issue 32): each chunk directory listed once however
many windows of the image are decoded together, and a sharded array read a shard per GET
with no listing first (the GET says whether a shard is stored). Counted at moto."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tifffile

import zarrfuse
from tests.mounting import mounted, requires_fuse
from tests.s3server import S3Server, server_with_bucket

pytestmark = [requires_fuse, pytest.mark.fuse, pytest.mark.timeout(120)]

BUCKET = "zarrfuse-requests"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as server:
        yield server


def _data() -> np.ndarray:
    return (np.arange(1024 * 1024, dtype=np.uint32) * 2654435761 % 65521).astype(
        "u2").reshape(1024, 1024)


def _whole_image_requests(s3: S3Server, tmp_path, name: str, **kwargs) -> dict[str, int]:
    data = _data()
    zarrfuse.create_array(f"s3://{BUCKET}/{name}", data=data,
                          storage_options={"endpoint_url": s3.url}, **kwargs)
    with mounted(f"s3://{BUCKET}/{name}", tmp_path / "mnt", "--read-only", "--format",
                 "ome-tiff", f"--storage-option=endpoint_url={s3.url}") as mnt:
        s3.reset()
        np.testing.assert_array_equal(tifffile.imread(mnt / f"{name}.ome.tif"), data)
        counts, _ = s3.snapshot()
    return dict(counts)


def test_each_chunk_directory_is_listed_once_for_a_whole_image(s3, tmp_path):
    counts = _whole_image_requests(s3, tmp_path, "plain", chunks=(64, 64))
    # 16 rows of chunks, a directory each; windows decoded together listed them again.
    assert counts.get("LIST", 0) <= 16, counts
    assert counts.get("GET", 0) == 256, counts


def test_a_sharded_whole_image_is_a_get_per_shard_and_no_listing(s3, tmp_path):
    counts = _whole_image_requests(s3, tmp_path, "sharded", chunks=(64, 64), shards=(256, 256))
    assert counts.get("LIST", 0) == 0, counts
    assert counts.get("GET", 0) <= 2 * 16, counts  # zarr-python: one per shard
