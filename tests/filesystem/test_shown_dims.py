"""Rendered views' paths leave out grid dimensions of extent 1: the coordinate maps are
inverse to each other, and walking the tree in listing order visits the grid in order."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.filesystem.test_view import walk
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding
from zarrfuse.filesystem.images.image_dims import ShownDims
from zarrfuse.filesystem.tree.fanout_tree import FanoutTree

# Up to 5 dimensions, many of extent 1 (as OME-Zarr's t, c, z), a few over 100 (two groups).
extents = st.one_of(st.just(1), st.integers(0, 4), st.integers(95, 130))
grids = st.lists(extents, min_size=0, max_size=5).filter(lambda g: math.prod(g) <= 2000)


@settings(max_examples=200, deadline=None)
@given(grid=grids)
def test_full_and_shown_are_inverse(grid):
    grid = tuple(grid)
    dims = ShownDims.for_browsing(grid)
    if dims is None:
        assert 1 not in grid
        return
    assert 1 not in dims.shown_grid and len(dims.shown_grid) == len(grid) - grid.count(1)
    for coords in itertools.product(*map(range, grid)):
        assert dims.full(dims.shown(coords)) == coords
    for shown in itertools.product(*map(range, dims.shown_grid)):
        assert dims.shown(dims.full(shown)) == shown


@settings(max_examples=60, deadline=None)
@given(grid=grids)
def test_listing_order_is_grid_order(grid):
    """Every chunk of the full grid has exactly one path, and paths in listing order name
    the chunks in grid (C) order, so the tiles of one image row follow each other."""
    grid = tuple(grid)
    dims = ShownDims.for_browsing(grid) or ShownDims(grid, tuple(range(len(grid))))
    tree = FanoutTree(dims.shown_grid, FanoutChunkKeyEncoding(100))
    if not tree.has_chunks:
        return
    if not tree.grid:  # every dimension of extent 1 (or none): one file, ``c`` at the root
        assert math.prod(grid) == 1
        return
    files, _ = walk(tree)
    assert [dims.full(coords) for _, coords in files] == list(
        itertools.product(*map(range, grid))
    )


def test_an_rgb_image_and_a_5d_image_with_one_t_c_z():
    rgb = ShownDims.for_browsing((3, 4, 1))
    assert rgb is not None and rgb.shown_grid == (3, 4) and rgb.full((2, 3)) == (2, 3, 0)
    ome = ShownDims.for_browsing((1, 1, 1, 40, 40))
    assert ome is not None and ome.dims == (3, 4) and ome.shown((0, 0, 0, 7, 9)) == (7, 9)
    single = ShownDims.for_browsing((1, 1))
    assert single is not None and single.shown_grid == () and single.full(()) == (0, 0)
    assert ShownDims.for_browsing((2, 3)) is None and ShownDims.for_browsing(()) is None
