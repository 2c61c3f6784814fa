"""File times on S3 mounts: each object's ``LastModified`` from the LIST, no request more.

Request counts are taken at the moto server (tests/s3server.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mounting import mounted, requires_fuse, run_with_timeout
from tests.storage.test_mount_s3 import BUCKET, client, endpoint, random_array, s3

pytestmark = [requires_fuse, pytest.mark.fuse]
__all__ = ["s3"]  # the module's server fixture


def shown_times(root: Path) -> dict[str, int]:
    """Every file's time in whole microseconds (as S3 keeps them), from ``find``."""
    out = run_with_timeout(["find", root, "-type", "f", "-printf", "%P %T@\n"]).stdout
    pairs = (line.rsplit(" ", 1) for line in out.splitlines())
    return {name: round(float(when) * 1e6) for name, when in pairs}


def test_times_come_from_the_listing_and_survive_a_remount(s3, tmp_path):
    random_array(s3, "times/a", (2, 3), (1, 1))
    listed = client(s3).list_objects_v2(Bucket=BUCKET, Prefix="times/a/")["Contents"]
    modified = {o["Key"]: round(o["LastModified"].timestamp() * 1e6) for o in listed}
    url = f"s3://{BUCKET}/times/a"
    with mounted(url, tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        s3.reset()
        first = shown_times(mnt)
        counts, _ = s3.snapshot()
        # One LIST of c/ (which rows hold chunks), one per row directory; nothing per file.
        assert counts["LIST"] == 3 and counts["HEAD"] == 0 and counts["GET"] == 0, counts
    assert first["c/0/000/0/002"] == modified["times/a/c/0/2"]
    assert first["zarr.json"] == modified["times/a/zarr.json"]
    assert {first[f"c/0/00{r}/0/00{c}"] for r in range(2) for c in range(3)} == {
        modified[f"times/a/c/{r}/{c}"] for r in range(2) for c in range(3)}
    with mounted(url, tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        assert shown_times(mnt) == first
