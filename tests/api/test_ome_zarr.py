"""OME-Zarr multiscales metadata as the OME-TIFF view reads it: from files ngff-zarr wrote
(0.4 in ``.zattrs``, 0.5 under ``"ome"``) and from hand-written documents."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from zarrfuse.api.ome_zarr import Axis, ome_color, ome_unit, read_multiscales, read_well_field
from zarrfuse.errors import ConfigurationError


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_metadata_ngff_zarr_wrote(tmp_path, version):
    import ngff_zarr  # noqa: PLC0415  (slow to import; only this test needs it)

    data = np.arange(2 * 37 * 53, dtype=np.uint16).reshape(2, 37, 53)
    image = ngff_zarr.to_ngff_image(
        data, dims=["c", "y", "x"], scale={"c": 1.0, "y": 0.5, "x": 0.25},
        axes_units={"y": "micrometer", "x": "micrometer"})
    multiscales = ngff_zarr.to_multiscales(
        image, scale_factors=[2], chunks=16, method=ngff_zarr.Methods.DASK_BIN_SHRINK)
    window = ngff_zarr.OmeroWindow(min=0, max=1, start=0, end=1)
    multiscales.metadata.omero = ngff_zarr.Omero(channels=[
        ngff_zarr.OmeroChannel(color="FF0000", window=window, label="dapi"),
        ngff_zarr.OmeroChannel(color="00FF00", window=window, label="gfp")])
    ngff_zarr.to_ngff_zarr(tmp_path / "image.zarr", multiscales, version=version)
    group = zarr.open_group(tmp_path / "image.zarr", mode="r")

    found = read_multiscales(dict(group.attrs))
    assert found is not None and found.version == version
    assert found.paths == ("scale0/image", "scale1/image")
    assert all(group[p].shape[0] == 2 for p in found.paths)
    assert found.axes == (Axis("c", "channel", None), Axis("y", "space", "micrometer"),
                          Axis("x", "space", "micrometer"))
    assert found.scale == (1.0, 0.5, 0.25)
    assert found.channel_names == ("dapi", "gfp")
    assert found.channel_colors == (-16776961, 16711935)  # FF0000FF, 00FF00FF as int32
    assert found.leading_roles() == ["c"]
    assert found.physical_sizes() == {"y": (0.5, "µm"), "x": (0.25, "µm")}


def test_hand_written_v04_with_a_global_transform_and_time():
    attributes = {
        "multiscales": [{
            "version": "0.4",
            "axes": [{"name": "t", "type": "time", "unit": "second"},
                     {"name": "z", "type": "space", "unit": "nanometer"},
                     {"name": "y", "type": "space", "unit": "nanometer"},
                     {"name": "x", "type": "space", "unit": "nanometer"}],
            "datasets": [
                {"path": "0", "coordinateTransformations": [
                    {"type": "scale", "scale": [1.0, 2.0, 4.0, 4.0]}]},
                {"path": "1", "coordinateTransformations": [
                    {"type": "scale", "scale": [1.0, 2.0, 8.0, 8.0]}]},
            ],
            "coordinateTransformations": [{"type": "scale", "scale": [0.5, 1.0, 1.0, 1.0]}],
        }],
        "omero": {"channels": [{"label": "only"}]},
    }
    found = read_multiscales(attributes)
    assert found is not None
    assert found.paths == ("0", "1") and found.scale == (0.5, 2.0, 4.0, 4.0)
    assert found.leading_roles() == ["t", "z"]
    assert found.physical_sizes() == {
        "t": (0.5, "s"), "z": (2.0, "nm"), "y": (4.0, "nm"), "x": (4.0, "nm")}
    assert found.channel_names == ("only",)


def test_hand_written_v05_and_older_forms():
    v05 = {"ome": {"version": "0.5", "multiscales": [{"datasets": [{"path": "s0"}]}]}}
    found = read_multiscales(v05)
    assert found is not None and found.version == "0.5" and found.paths == ("s0",)
    assert found.axes == () and found.scale is None and found.physical_sizes() == {}
    v03 = {"multiscales": [{"version": "0.3", "axes": ["t", "c", "z", "y", "x"],
                            "datasets": [{"path": "0"}, {"path": "1"}]}]}
    found = read_multiscales(v03)
    assert found is not None and found.leading_roles() == ["t", "c", "z"]
    assert read_multiscales({"title": "not an image"}) is None
    with pytest.raises(ConfigurationError, match="malformed"):
        read_multiscales({"multiscales": [{"axes": []}]})


def test_units():
    assert ome_unit("micrometer") == "µm" and ome_unit("µm") == "µm"
    assert ome_unit("millisecond") == "ms" and ome_unit("furlong") is None
    assert ome_unit(None) is None


@pytest.mark.parametrize("given, expected", [
    ("FF0000", -16776961), ("0000ff", 65535), ("#00FF00", 16711935), ("FFFFFF80", -128),
    ("red", None), ("12345", None), (None, None),
])
def test_omero_colours_become_ome_xml_colours(given, expected):
    assert ome_color(given) == expected


@pytest.mark.parametrize("path", ["..", ".", "", "../../etc", "0/../..", "/0"])
def test_a_well_whose_first_field_is_no_child_of_it_shows_no_picture(path):
    """A hostile document cannot make the well's picture read outside the well."""
    assert read_well_field({"well": {"images": [{"path": path}]}}) is None
    assert read_well_field({"ome": {"well": {"images": [{"path": "0"}]}}}) == "0"
