"""Encoding chunks as files: exact bytes, exact round trips, sizes that do not depend on values."""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
import tifffile
from PIL import Image

from zarrfuse.errors import ConfigurationError, InvalidArgument
from zarrfuse.filesystem.images import render

DTYPES = ["bool", "int8", "uint16", "int64", "float16", "float32", "complex128"]
SHAPES = [(), (1,), (7,), (5, 3), (64, 64), (2, 3, 4, 5), (4, 5, 3)]


def sample(shape, dtype):
    rng = np.random.default_rng(1)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    return (rng.random(shape) * 100).astype(dtype)


@pytest.mark.parametrize("fmt", ["tiff", "npy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_templated_encoding_is_the_full_encoding(fmt, dtype, shape):
    """The fast path (template around the values) writes the very bytes tifffile/numpy do."""
    data = sample(shape, dtype)
    encoded = render.encode(fmt, data)
    assert encoded == render._encode(fmt, data)
    assert len(encoded) == render.encoded_size(fmt, shape, np.dtype(dtype).str)
    back = render.decode(fmt, encoded, shape, np.dtype(dtype))
    np.testing.assert_array_equal(back, data)


def test_png_sizes_do_not_depend_on_values():
    for shape in [(5, 7), (64, 3, 3), (9, 9, 4)]:
        dtype = "uint8"
        a, b = np.zeros(shape, dtype), sample(shape, "uint8")
        assert len(render.encode("png", a)) == len(render.encode("png", b)) == render.encoded_size(
            "png", shape, np.dtype(dtype).str)


def test_decode_refuses_other_shapes_dtypes_and_garbage():
    good = render.encode("tiff", np.zeros((4, 4), "uint16"))
    with pytest.raises(InvalidArgument, match="shape"):
        render.decode("tiff", good, (4, 5), np.dtype("uint16"))
    with pytest.raises(InvalidArgument, match="uint8"):
        render.decode("tiff", good, (4, 4), np.dtype("uint8"))
    with pytest.raises(InvalidArgument, match="not a readable"):
        render.decode("npy", b"garbage", (4, 4), np.dtype("uint16"))


@pytest.mark.parametrize(
    "dtype, shape", [("float32", (8, 8)), ("uint8", (8, 8, 2)), ("int16", (8, 8))]
)
def test_png_refuses_what_it_cannot_show(dtype, shape):
    with pytest.raises(ConfigurationError, match="png"):
        render.check_renderable("png", np.dtype(dtype), shape)


def test_multi_page_tiff_keeps_pages_over_leading_dimensions():
    data = sample((2, 3, 4, 5), "uint16")
    with tifffile.TiffFile(io.BytesIO(render.encode("tiff", data))) as tif:
        assert len(tif.pages) == 6 and tif.pages[0].shape == (4, 5)


@pytest.mark.parametrize("fmt", ["tiff", "npy"])
@pytest.mark.parametrize(
    "shape, dtype",
    [((64, 64), "u1"), ((3, 40, 50), "f4"), ((5,), ">u2"), ((), "f8"), ((2, 3, 4, 5), "i2"),
     ((300, 700), "u1"), ((7, 9), "bool"), ((4, 4, 3), "u1")],
)
def test_encoded_size_is_the_size_of_the_encoding(fmt, shape, dtype):
    assert render.encoded_size(fmt, shape, np.dtype(dtype).str) == len(
        render.encode(fmt, np.zeros(shape, dtype=dtype))
    )


def test_sizing_a_huge_chunk_allocates_nothing_of_its_size():
    """A 2 GiB uint8 chunk (and a 1 TiB one): sized in well under a second, with a few MB."""
    tracemalloc.start()
    try:
        for fmt in ("tiff", "npy"):
            assert render.encoded_size(fmt, (46341, 46341), "|u1") > 46341 * 46341
            assert render.encoded_size(fmt, (1 << 20, 1 << 20), "|u1") > 1 << 40
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


@pytest.mark.parametrize("samples", [3, 4])
@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
def test_a_colour_chunk_is_one_rgb_page_that_reads_back_exactly(samples, dtype):
    """Issue 31 point 1: y, x and 3 or 4 samples is one RGB(A) page, not 16 grey slivers."""
    data = sample((16, 12, samples), dtype)
    encoded = render.encode("tiff", data)
    with tifffile.TiffFile(io.BytesIO(encoded)) as tif:
        assert len(tif.pages) == 1
        page = tif.pages[0]
        assert page.photometric == tifffile.PHOTOMETRIC.RGB and page.shape == (16, 12, samples)
        assert (samples == 4) == (tuple(page.extrasamples) == (tifffile.EXTRASAMPLE.UNASSALPHA,))
    assert len(encoded) == render.encoded_size("tiff", data.shape, np.dtype(dtype).str)
    np.testing.assert_array_equal(render.decode("tiff", encoded, data.shape, data.dtype), data)
    if dtype == "uint8":  # Pillow, as image programs read it: colour at full size
        from PIL import Image  # noqa: PLC0415

        with Image.open(io.BytesIO(encoded)) as image:
            assert image.mode == ("RGB" if samples == 3 else "RGBA")
            np.testing.assert_array_equal(np.asarray(image), data)


def test_other_trailing_threes_stay_grey_dimensions():
    for shape, dtype in [((16, 12, 3), "float32"), ((2, 16, 12, 3), "uint8"), ((16, 3), "uint8")]:
        with tifffile.TiffFile(io.BytesIO(render.encode("tiff", sample(shape, dtype)))) as tif:
            assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.MINISBLACK


def _png(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(value).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("shape", [(6, 5, 3), (6, 5)])
def test_an_opaque_alpha_a_save_adds_is_dropped_and_a_translucent_one_refused(shape):
    """GIMP exports a layer with alpha as RGBA or grey + alpha (issue 54, point 4)."""
    value = sample(shape, "uint8")
    with_alpha = np.concatenate([value.reshape(6, 5, -1), np.full((6, 5, 1), 255, "u1")],
                                axis=-1)
    np.testing.assert_array_equal(render.decode("png", _png(with_alpha), shape,
                                                np.dtype("u1")), value)
    with_alpha[2, 3, -1] = 254
    with pytest.raises(InvalidArgument, match="alpha channel, translucent in 1 of 30 pixels"):
        render.decode("png", _png(with_alpha), shape, np.dtype("u1"))
