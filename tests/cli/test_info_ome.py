"""``zarrfuse info`` of an OME-Zarr image (issue 31 points 2 and 5): its axes, levels and
channels, whether a mount shows it as colour, and what a write does to its lower levels."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from zarrfuse.cli.info import describe, describe_json


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


def _plate(root, version):
    """An HCS plate as OME-Zarr lays it out: rows A, B, columns 1..3, three wells of two
    fields each, every field a 2-channel image (v0.5: Zarr v3, under "ome"; v0.4: v2)."""
    zarr_format = 3 if version == "0.5" else 2

    def attrs(group, meta):
        group.attrs.update({"ome": {"version": version, **meta}} if version == "0.5"
                           else {**meta, **({"version": version} if "well" in meta else {})})

    wells = ["A/1", "A/2", "B/3"]
    plate = zarr.open_group(root, mode="w", zarr_format=zarr_format)
    attrs(plate, {"plate": {"name": "screen", "field_count": 2,
                            "rows": [{"name": "A"}, {"name": "B"}],
                            "columns": [{"name": n} for n in ("1", "2", "3")],
                            "wells": [{"path": w, "rowIndex": "AB".index(w[0]),
                                       "columnIndex": int(w[2]) - 1} for w in wells]}})
    for well_path in wells:
        well = plate.require_group(well_path)
        attrs(well, {"well": {"images": [{"path": "0"}, {"path": "1"}]}})
        for field in ("0", "1"):
            image = well.require_group(field)
            image.create_array("0", data=np.zeros((2, 8, 8), "u2"), chunks=(1, 8, 8))
            attrs(image, {"multiscales": [{"axes": [{"name": "c", "type": "channel"},
                                                    {"name": "y", "type": "space"},
                                                    {"name": "x", "type": "space"}],
                                           "datasets": [{"path": "0"}]}],
                          "omero": {"channels": [{"label": "DAPI", "color": "0000FF"},
                                                 {"label": "GFP", "color": "00FF00"}]}})


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_info_describes_an_hcs_plate(tmp_path, version):
    """Rows, columns, wells and fields of the plate, each well's fields, each image's
    channels; ``--json`` says the same."""
    _plate(tmp_path / "plate.ome.zarr", version)
    source = str(tmp_path / "plate.ome.zarr")
    lines = describe(source).splitlines()
    at = lines.index(f"{source}: Zarr v{3 if version == '0.5' else 2} group")
    assert lines[at + 1] == ("  HCS plate screen: 2 rows (A, B) x 3 columns (1, 2, 3), "
                             "3 wells (A/1, A/2, B/3), up to 2 fields per well")
    well = lines.index(f"{source}/B/3: Zarr v{3 if version == '0.5' else 2} group")
    assert lines[well + 1] == "  HCS well, 2 fields (images 0, 1)"
    assert lines.count("  channels DAPI #0000FF; GFP #00FF00") == 6  # every field's image
    nodes = {node["path"]: node for node in describe_json(source)["nodes"]}
    assert nodes[source]["plate"] == {"name": "screen", "rows": ["A", "B"],
                                      "columns": ["1", "2", "3"],
                                      "wells": ["A/1", "A/2", "B/3"], "fields_per_well": 2}
    assert nodes[f"{source}/A/2"]["well"] == {"fields": ["0", "1"]}
    assert [c["name"] for c in nodes[f"{source}/A/2/1"]["ome"]["channels"]] == ["DAPI", "GFP"]
