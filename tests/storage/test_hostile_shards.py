"""A shard whose index lies, on a web server: the tail read that brings the index tells the
shard's size, so the index is refused whole (EIO for every tile of that shard, as on S3;
``docs/spec-notes.md``), and the mount stays well, never sizing a request or a buffer by
offsets it cannot trust: the other shard reads right."""

from __future__ import annotations

import google_crc32c
import numpy as np
import pytest
import tifffile
import zarr

from tests.http_servers import nginx
from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

FAR = 1 << 40  # a terabyte into a shard of a few hundred kilobytes


def _lying_shard(path) -> np.ndarray:
    """A 256 x 512 array in two shards of 16 inner chunks, the first one's index rewritten
    so that its last inner chunk sits a terabyte in (checksum recomputed: it decodes)."""
    data = np.random.default_rng(6).integers(0, 60000, (256, 512)).astype("u2")
    zarr.create_array(path, data=data, chunks=(64, 64), shards=(256, 256))
    shard = path / "c" / "0" / "0"
    raw = bytearray(shard.read_bytes())
    index_at = len(raw) - (16 * 16 + 4)
    table = np.frombuffer(bytes(raw[index_at : index_at + 256]), dtype="<u8").reshape(16, 2)
    table = table.copy()
    table[15, 0] = FAR
    body = table.astype("<u8").tobytes()
    raw[index_at:] = body + np.uint32(google_crc32c.value(body)).astype("<u4").tobytes()
    shard.write_bytes(bytes(raw))
    return data


def test_an_index_naming_far_offsets_is_eio_and_the_mount_stays_well(tmp_path):
    data = _lying_shard(tmp_path / "www" / "s.zarr")
    log = tmp_path / "mount.log"
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            mounted(f"{url}/s.zarr", tmp_path / "mnt", "--read-only", "--format",
                    "tiff", "--log-file", str(log)) as mnt:
        for y, x in ((0, 0), (3, 3), (1, 2)):  # the lying shard's tiles, first and last
            tile = mnt / "planes" / f"y{y:03}" / f"y{y:03}-x{x:03}.tiff"
            result = run_with_timeout(["cat", str(tile)], 30, check=False)
            assert result.returncode != 0 and "Input/output error" in result.stderr, result
        for y, x in ((0, 4), (3, 7), (2, 5)):  # the other shard's still read right
            tile = tifffile.imread(mnt / "planes" / f"y{y:03}" / f"y{y:03}-x{x:03}.tiff")
            np.testing.assert_array_equal(tile, data[y * 64 : (y + 1) * 64,
                                                     x * 64 : (x + 1) * 64])
    said = [line for line in log.read_text().splitlines() if " WARNING " in line]
    assert said and all("past the shard's end" in line for line in said), said
