"""``--format ome-tiff`` on S3 (the loopback moto server): an absent chunk reads as the fill
value at the cost of its row's LIST, never a GET or HEAD of its own; a stored chunk costs one
GET; and opening the file reads no chunk."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tifffile

import zarrfuse
from tests.mounting import mounted, requires_fuse
from tests.storage.test_mount_s3 import BUCKET, endpoint, options, s3  # noqa: F401 (fixture)

pytestmark = [requires_fuse, pytest.mark.fuse]


def test_absent_chunks_cost_no_request_beyond_the_listing(s3, tmp_path):  # noqa: F811
    source = f"s3://{BUCKET}/slides/a"
    a = zarrfuse.create_array(source, shape=(256, 256), chunks=(64, 64), dtype="u2",
                              fill_value=3, storage_options=options(s3))
    a[:64, 64:128] = 9  # the one stored chunk: row 0, column 1
    with mounted(source, tmp_path / "mnt", "--format", "ome-tiff", *endpoint(s3)) as mnt:
        path = mnt / "a.ome.tif"
        s3.reset()
        with open(path, "rb", buffering=0) as f, tifffile.TiffFile(f) as tif:
            offsets, counts = tif.pages[0].dataoffsets, tif.pages[0].databytecounts
            requests, _ = s3.snapshot()
            assert sum(requests.values()) == 0, requests  # the header is computed
            absent = np.frombuffer(os.pread(f.fileno(), counts[2 * 4 + 3], offsets[11]), "<u2")
            requests, _ = s3.snapshot()
            assert (absent == 3).all()
            assert requests.get("GET", 0) == 0 and requests.get("HEAD", 0) == 0, requests
            assert requests.get("LIST", 0) == 1, requests  # row 2's directory
            stored = np.frombuffer(os.pread(f.fileno(), counts[1], offsets[1]), "<u2")
            requests, _ = s3.snapshot()
            assert (stored == 9).all()
            assert requests.get("GET", 0) == 1 and requests.get("HEAD", 0) == 0, requests
