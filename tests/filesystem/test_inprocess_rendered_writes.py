"""A rendered file's write takes the path every chunk write takes (issue 30, points 1 and 6):
zarr's codecs encode the chunk, and the chunk source stores it (parts, journal, chunk lock),
instead of zarr writing through the store behind the mount's back."""

from __future__ import annotations

import io
import threading

import numpy as np
import tifffile
import zarr

import zarrfuse
from tests.arrays import make_crc_array, snapshot
from tests.inprocess import in_process


def _tiff(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value)
    return out.getvalue()


def test_planes_of_one_chunk_written_at_once_are_both_kept(tmp_path):
    """Two planes of one chunk written together: each write reads the chunk, changes its
    plane and stores the chunk; one at a time per chunk, so neither undoes the other."""
    path = tmp_path / "zyx"
    zarr.create_array(path, shape=(2, 32, 32), chunks=(2, 32, 32), dtype="u1", fill_value=0,
                      dimension_names=("z", "y", "x"), compressors=zarr.codecs.ZstdCodec())
    with in_process(path, format="tiff") as fs:
        planes = sorted(fs.walk())
        planes = [p for p in planes if p.endswith(".tiff")]
        assert len(planes) == 2
        for round_ in range(25):
            values = [np.full((32, 32), 10 * z + round_ % 10, "u1") for z in (0, 1)]
            writers = [threading.Thread(target=fs.write, args=(name, _tiff(value)))
                       for name, value in zip(planes, values, strict=True)]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(30)
            stored = zarr.open_array(path)[...]
            np.testing.assert_array_equal(stored, np.stack(values), f"round {round_}")


def test_a_rendered_write_of_a_concat_parts_array_stores_its_parts(tmp_path):
    path = make_crc_array(tmp_path / "crc")
    before = snapshot(path)
    value = np.full((4, 4), 200, "u1")
    with in_process(path, format="tiff") as fs:
        name = next(p for p in sorted(fs.walk()) if p.endswith(".tiff"))
        fs.write(name, _tiff(value))
    changed = {k for k, v in snapshot(path).items() if before.get(k) != v}
    assert changed == {"c/0/0", "c/0/0.crc32c"}, changed  # both parts, nothing left beside
    np.testing.assert_array_equal(zarrfuse.open_array(path)[:4, :4], value)
