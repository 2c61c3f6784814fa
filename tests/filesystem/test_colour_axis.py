"""When a channel axis is one picture's colours (issue 31, point 2): the ``omero`` reading
and the ``--colour`` policy, without a mount."""

from __future__ import annotations

import numpy as np
import pytest

from zarrfuse.api.ome_zarr import means_colour
from zarrfuse.filesystem.images.colour_axis import colour_axis


def _channels(*colours: str | None) -> dict:
    return {"omero": {"channels": [{} if c is None else {"color": c} for c in colours]}}


@pytest.mark.parametrize(("attributes", "colour"), [
    (_channels("FF0000", "00FF00", "0000FF"), True),
    (_channels("ff0000", "00ff00", "0000ff", "FFFFFF"), True),  # alpha in any colour
    (_channels("#FF0000", "#00FF00", "#0000FF"), True),
    (_channels("0000FF", "00FF00", "FF0000"), False),  # DAPI, GFP, mCherry: stains
    (_channels("FF0000", "00FF00"), False),
    (_channels("FF0000", "00FF00", "0000FF", "FFFFFF", "FFFFFF"), False),
    (_channels(None, None, None), False),
    ({"omero": {"rdefs": {"model": "color"}, "channels": [{}, {}, {}]}}, True),
    ({"omero": {"rdefs": {"model": "greyscale"}, "channels": [{}, {}, {}]}}, False),
    ({"omero": {"rdefs": {"model": "color"},  # the colours say what the channels are
                "channels": [{"color": "0000FF"}, {"color": "00FF00"}, {"color": "FF0000"}]}},
     False),
    ({}, False),
    ({"omero": "not a mapping"}, False),
])
def test_omero_says_whether_the_channels_are_colour(attributes, colour):
    assert means_colour(attributes) is colour


def test_the_policy_and_the_data_decide_the_axis():
    roles = ["t", "c", "z"]
    shape = (2, 3, 4, 64, 64)
    found = colour_axis(roles, shape, np.dtype("u1"), means_colour=True)
    assert found is not None and found.axis == 1 and found.samples == 3
    assert found.order == (0, 2, 3, 4, 1)
    assert found.image_shape(shape) == (2, 4, 64, 64, 3)
    assert colour_axis(roles, shape, np.dtype("u1")) is None  # auto, metadata silent
    assert colour_axis(roles, shape, np.dtype("u1"), policy="always") is not None
    assert colour_axis(roles, shape, np.dtype("u1"), policy="never", means_colour=True) is None
    assert colour_axis(roles, shape, np.dtype("f4"), policy="always") is None  # not RGB
    assert colour_axis(roles, (2, 5, 4, 64, 64), np.dtype("u2"), policy="always") is None
    assert colour_axis(["z", None], (3, 4, 8, 8), np.dtype("u1"), policy="always") is None
