"""An OME-Zarr image's group document is read once per metadata TTL, not once per level:
each level's view asks which image it belongs to, and on a remote store every read is a
request (issue 32: no request a cache can answer)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import zarr

from tests.inprocess import in_process


def _image(root) -> None:
    group = zarr.open_group(root, mode="w")
    for i, side in enumerate((64, 32, 16)):
        zarr.create_array(root / str(i), data=np.zeros((side, side), "u1"), chunks=(8, 8),
                          dimension_names=("y", "x"))
    group.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0**i, 2.0**i]}]} for i in range(3)]}]}


def test_the_image_groups_document_is_read_once_for_all_its_levels(tmp_path):
    _image(tmp_path / "img.ome.zarr")
    with in_process(str(tmp_path / "img.ome.zarr"), format="tiff", read_only=True) as fs:
        backend = fs.fs.namespace.catalog.backend
        reads: Counter[str] = Counter()
        read = backend.read_document

        def counted(key: str):
            reads[key] += 1
            return read(key)

        backend.read_document = counted
        for level in ("0", "1", "2"):
            assert fs.listdir(level) == ["planes"]
            assert fs.listdir(f"{level}/planes")  # each level's view is built
    assert reads["zarr.json"] <= 1, reads  # was once per level (3)
    assert all(reads[f"{level}/zarr.json"] <= 1 for level in "012"), reads
