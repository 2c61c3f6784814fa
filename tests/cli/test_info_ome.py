"""``zarrfuse info`` of an OME-Zarr image (issue 31 points 2 and 5): its axes, levels and
channels, whether a mount shows it as colour, and what a write does to its lower levels."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from zarrfuse.cli.info import describe


def _image(root, omero, method):
    group = zarr.open_group(root, mode="w", zarr_format=2)
    for i, side in enumerate((64, 32)):
        zarr.create_array(root / str(i), data=np.zeros((3, side, side), "u1"),
                          chunks=(3, 32, 32), zarr_format=2)
    multiscale = {"version": "0.4", "axes": [{"name": "c", "type": "channel"},
                                             {"name": "y", "type": "space"},
                                             {"name": "x", "type": "space"}],
                  "datasets": [{"path": "0"}, {"path": "1"}]}
    if method:
        multiscale["type"] = method
    group.attrs.update({"multiscales": [multiscale], "omero": omero})


RGB = {"channels": [{"label": n, "color": c} for n, c in (
    ("red", "FF0000"), ("green", "00FF00"), ("blue", "0000FF"))]}
STAINS = {"channels": [{"label": n, "color": c} for n, c in (
    ("DAPI", "0000FF"), ("GFP", "00FF00"), ("mCherry", "FF0000"))]}


@pytest.mark.parametrize(("omero", "method", "colour", "after"), [
    (RGB, "mean", "shown as colour: yes", "a write reaches every level: "
     "recomputed from the written region by mean (its type 'mean')"),
    (STAINS, "gaussian", "shown as colour: no",
     "stale: its type 'gaussian' is not one zarrfuse recomputes"),
    (RGB, None, "shown as colour: yes", "a write reaches every level: recomputed from the "
     "written region as ome-zarr-py makes them (it names no method: ome-zarr-py's default, "
     "resize)"),
])
def test_info_describes_an_ome_zarr_image(tmp_path, omero, method, colour, after):
    _image(tmp_path / "img.ome.zarr", omero, method)
    text = describe(str(tmp_path / "img.ome.zarr"))
    assert "Zarr v2 group" in text and "Zarr v2 array, shape [3, 64, 64]" in text
    assert "OME-Zarr 0.4 image, axes c (channel), y (space), x (space)" in text
    assert "levels 0 (3 x 64 x 64), 1 (3 x 32 x 32) (full resolution first)" in text
    names = [c["label"] for c in omero["channels"]]
    assert f"channels {names[0]} #{omero['channels'][0]['color']}" in text
    assert colour in text and after in text
