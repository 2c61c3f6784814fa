"""Names zarrfuse writes into stored documents are a file format, not code: they must not
follow module renames, or arrays written by an earlier zarrfuse stop being recognised."""

from __future__ import annotations

import json

import numpy as np

import zarrfuse
from zarrfuse.cli import info


def test_dual_access_attribute_keeps_its_stored_name(tmp_path):
    path = tmp_path / "tiled"
    array = zarrfuse.create_tiff_array(path, shape=(64, 64), dtype="u1", tile_shape=(32, 32))
    array[:] = np.arange(64 * 64, dtype="u1").reshape(64, 64)
    attributes = json.loads((path / "zarr.json").read_text())["attributes"]
    assert attributes == {"zarrfuse.tiff_shards": {"samples": False, "bigtiff": False}}


def test_an_array_written_with_the_stored_name_is_recognised(tmp_path):
    """A document as an earlier release wrote it, attribute by its literal name."""
    path = tmp_path / "tiled"
    zarrfuse.create_tiff_array(path, shape=(64, 64), dtype="u1", tile_shape=(32, 32))
    document = json.loads((path / "zarr.json").read_text())
    document["attributes"] = {"zarrfuse.tiff_shards": {"samples": False, "bigtiff": False}}
    (path / "zarr.json").write_text(json.dumps(document))
    assert "dual-access (shards are TIFF files): yes" in info.describe(str(path))
