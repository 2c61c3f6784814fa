"""A sparse 10**12-chunk grid on S3 (the loopback moto server): ``find`` costs one LIST per
store directory that holds chunks, and a chunk written into an empty directory shows."""

from __future__ import annotations

import pytest

import zarrfuse
from tests.fuse.test_mount_sparse import SHAPE, VIEW, found_files, random_points, view_paths
from tests.mounting import mounted, requires_fuse
from tests.storage.test_mount_s3 import BUCKET, endpoint, options, s3  # noqa: F401 (fixture)

pytestmark = [requires_fuse, pytest.mark.fuse]


def test_find_over_a_sparse_grid_on_s3_lists_each_stored_directory_once(s3, tmp_path):  # noqa: F811
    points = random_points(100, seed=3)
    a = zarrfuse.create_array(
        f"s3://{BUCKET}/sparse/a", shape=SHAPE, chunks=(1, 1), dtype="u1", fill_value=0,
        compressors=None, storage_options=options(s3),
    )
    for i, j in points:
        a[i, j] = 5
    source = f"s3://{BUCKET}/sparse/a"
    with mounted(source, tmp_path / "mnt", "--metadata-ttl", "60", *endpoint(s3)) as mnt:
        s3.reset()  # mounting read zarr.json
        assert found_files(mnt) == view_paths(points) | {"zarr.json"}
        counts, _ = s3.snapshot()
        rows = {i for i, _ in points}
        # c/ once (which rows are stored), then each stored row's directory once
        assert counts["LIST"] == 1 + len(rows), counts
        assert counts["HEAD"] == 0 and counts["GET"] == 0, counts
        new = (999_999, 0)
        key = VIEW.encode_chunk_key(new)
        (mnt / key).write_bytes(b"\x09")  # into a directory that no listing showed
        assert found_files(mnt) == view_paths([*points, new]) | {"zarr.json"}
    assert a[new] == 9
