"""The strip-organised sibling for ImageJ 1.x (issue 31, point 4), written to memory and read
back by tifffile: one strip per row, planes end to end (ImageJ reads them by the first
offset and the plane size), ImageJ's description, RGB as one picture."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tifffile

from zarrfuse.errors import ConfigurationError
from zarrfuse.tiff.strip_image import StripImagePlan, imagej_description, imagej_pages


def _file(plan: StripImagePlan, pixels: np.ndarray) -> bytes:
    """The file: the plan's header, then the pixels in page order (no padding: strips are
    whole rows)."""
    header = plan.header_bytes(0, plan.data_start)
    body = np.ascontiguousarray(pixels, dtype=plan.dtype).tobytes()
    assert plan.data_start + len(body) == plan.size
    return header + body


@pytest.mark.parametrize(("shape", "samples", "dtype"), [
    ((20, 37), 1, "u1"), ((3, 20, 37), 1, "u2"), ((2, 3, 11, 19), 1, "f4"),
    ((20, 37, 3), 3, "u1"), ((2, 9, 13, 4), 4, "u2"),
])
def test_a_strip_file_reads_back_with_every_plane_contiguous(shape, samples, dtype):
    pixels = np.random.default_rng(1).integers(0, 200, shape).astype(dtype)
    lead = shape[: len(shape) - (3 if samples > 1 else 2)]
    pages = int(np.prod(lead)) if lead else 1
    plan = StripImagePlan(shape, np.dtype(dtype), samples=samples,
                          description=imagej_description(pages, None))
    with tifffile.TiffFile(io.BytesIO(_file(plan, pixels))) as tif:
        assert tif.is_imagej and len(tif.pages) == pages
        first = tif.pages[0]
        assert first.rowsperstrip == 1 and not first.is_tiled
        plane = first.databytecounts[0] * first.imagelength
        offsets = [page.dataoffsets[0] for page in tif.pages]
        assert offsets == [plan.data_start + i * plane for i in range(pages)]
        np.testing.assert_array_equal(tif.asarray().reshape(shape), pixels)


def test_imagej_order_and_description():
    order, dims = imagej_pages(["t", "c", "z"], [2, 3, 4])
    assert order == [0, 2, 1] and dims == {"t": 2, "z": 4, "c": 3}
    assert imagej_description(24, dims) == (
        "ImageJ=1.11a\nimages=24\nchannels=3\nslices=4\nframes=2\nhyperstack=true\n"
        "mode=grayscale\n")
    assert imagej_pages(["z", None], [2, 3]) == ([0, 1], None)
    assert imagej_pages(["c", "c"], [2, 3])[1] is None
    assert imagej_description(5, None) == "ImageJ=1.11a\nimages=5\nslices=5\n"
    assert imagej_description(4, {"z": 4}) == "ImageJ=1.11a\nimages=4\nslices=4\n"


def test_an_image_over_4_gib_has_no_strip_file():
    with pytest.raises(ConfigurationError):
        StripImagePlan((70000, 70000), np.dtype("u1"), samples=1, description="")
