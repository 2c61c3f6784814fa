"""Downsampling a written region into a pyramid's lower levels (issue 31, point 5)."""

from __future__ import annotations

import numpy as np
import pytest

from zarrfuse.api.pyramid import downsample, method_of


def test_mean_of_edge_blocks_averages_the_pixels_they_have():
    values = np.arange(5 * 3, dtype="u2").reshape(5, 3)
    out = downsample(values, (2, 2), "mean", (3, 2))
    expected = [[np.mean(values[y : y + 2, x : x + 2]) for x in (0, 2)] for y in (0, 2, 4)]
    np.testing.assert_array_equal(out, np.rint(expected).astype("u2"))
    assert out.dtype == values.dtype


def test_nearest_takes_each_blocks_first_pixel_and_floats_keep_their_means():
    values = np.arange(16, dtype="f4").reshape(4, 4)
    np.testing.assert_array_equal(downsample(values, (2, 2), "nearest", (2, 2)),
                                  [[0, 2], [8, 10]])
    np.testing.assert_array_equal(downsample(values, (1, 2), "mean", (4, 2)),
                                  values.reshape(4, 2, 2).mean(axis=2))


@pytest.mark.parametrize(("named", "method"), [
    ("nearest", "nearest"), ("mean", "mean"), ("local_mean", "mean"), ("Bin_Shrink", "mean"),
    ("gaussian", None), (None, "resize"), ("", "resize")])
def test_the_metadata_names_the_method(named, method):
    assert method_of(named) == method
