"""The view tree: directories derived from the grid match the fanout keys of every chunk."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrfuse.api.regions import chunk_region
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    parse_encoding,
)
from zarrfuse.filesystem.tree.fanout_tree import DirPosition, FanoutTree, view_encoding

ROOT = DirPosition()
"""The directory ``c``."""


def walk(tree: FanoutTree, pos: DirPosition = ROOT, path: tuple[str, ...] = ("c",)):
    """Every (file path, coords) the tree yields, and the largest directory seen."""
    names = tree.child_names(pos)
    largest = len(names)
    files = []
    for name in names:
        child = tree.child(pos, name)
        assert child is not None, (path, name)
        if isinstance(child, int):
            assert tree.is_leaf(pos)
            files.append(("/".join((*path, name)), (*pos.done, child)))
        else:
            sub_files, sub_largest = walk(tree, child, (*path, name))
            files.extend(sub_files)
            largest = max(largest, sub_largest)
    return files, largest


grids = st.one_of(
    st.lists(st.integers(1, 12_000), min_size=1, max_size=1),  # three groups at max_children 100
    st.lists(st.integers(1, 130), min_size=2, max_size=3).filter(lambda g: math.prod(g) <= 3000),
)


@settings(max_examples=40, deadline=None)
@given(grid=grids, mc=st.sampled_from([100, 1000]))
def test_tree_holds_exactly_the_grids_keys(grid, mc):
    encoding = FanoutChunkKeyEncoding(mc)
    tree = FanoutTree(tuple(grid), encoding)
    files, largest = walk(tree)
    expected = {encoding.encode_chunk_key(c): c for c in itertools.product(*map(range, grid))}
    assert dict(files) == expected
    assert largest <= mc


def test_large_coordinates_and_leaf_ranges():
    tree = FanoutTree((3, 1_234_568), FanoutChunkKeyEncoding(1000))
    pos = ROOT
    for name in ["0", "002", "2", "001", "234"]:
        pos = tree.child(pos, name)
        assert isinstance(pos, DirPosition)
    assert tree.is_leaf(pos)
    assert tree.leaf_range(pos) == (1_234_000, 1_234_567)
    assert tree.child(pos, "567") == 1_234_567
    assert tree.child(pos, "568") is None  # outside the grid
    assert tree.file_name((), 1_234_567) == "567"
    assert tree.child(ROOT, "3") is None  # dimension 0 has three chunks: one group only


# The Arabic-Indic digits for "001": int() accepts them, a chunk name lookup must not.
@pytest.mark.parametrize("name", ["00", "0000", "+01", " 01", "01 ", "٠٠١", "x", ""])  # noqa: RUF001  (deliberate non-ASCII digits)
def test_child_lookup_is_exact(name):
    tree = FanoutTree((50,), FanoutChunkKeyEncoding(1000))
    count0 = tree.child(ROOT, "0")
    assert tree.child(count0, name) is None
    assert tree.child(ROOT, "00") is None and tree.child(ROOT, "1") is None


def test_view_encoding_defaults_and_overrides():
    default = parse_encoding({"name": "default"})
    assert view_encoding(default, None, None) == FanoutChunkKeyEncoding(1000)
    assert view_encoding(default, ".tiff", 250) == SuffixChunkKeyEncoding(
        ".tiff", FanoutChunkKeyEncoding(100))
    own = SuffixChunkKeyEncoding(".png", FanoutChunkKeyEncoding(10000))
    assert view_encoding(own, None, None) == own
    assert view_encoding(own, "", None) == FanoutChunkKeyEncoding(10000)
    assert view_encoding(SuffixChunkKeyEncoding(".npy"), None, None) == SuffixChunkKeyEncoding(
        ".npy", FanoutChunkKeyEncoding(1000))


def test_chunk_region_is_clipped_at_the_array_edge():
    assert chunk_region((0, 1), (4, 3), (10, 5)) == (slice(0, 4), slice(3, 5))
    assert chunk_region((2,), (4,), (10,)) == (slice(8, 10),)
    assert chunk_region((), (), ()) == ()


def test_a_labelled_tree_names_folders_by_axis_and_files_by_every_coordinate():
    """Issue 31 point 3: a plane view's tree: no count level where an axis fits in one
    folder, the count level where it does not, and a file name with every coordinate."""
    tree = FanoutTree((2, 1500, 3), FanoutChunkKeyEncoding(1000), ("t", "z", "x"))
    assert tree.top == "planes"
    root = tree.root
    assert tree.child_names(root) == ["t000", "t001"]  # t fits: no "t" count folder
    t1 = tree.child(root, "t001")
    assert isinstance(t1, DirPosition) and tree.child_names(t1) == ["z", "z1"]
    big = tree.child(tree.child(t1, "z1"), "z001")
    leaf = tree.child(big, "z234")
    assert isinstance(leaf, DirPosition) and tree.is_leaf(leaf)
    assert tree.child_names(leaf) == [f"t001-z1234-x{x:03d}" for x in range(3)]
    assert tree.child(leaf, "t001-z1234-x002") == 2
    for wrong in ("t000-z1234-x002", "t001-z1234-x003", "t001-z1234-x2", "x002", "t001-x002"):
        assert tree.child(leaf, wrong) is None, wrong
    key = "/".join(tree.encoding.encode_chunk_key((1, 1234, 2)).split("/")[1:])
    assert tree.labelled(key.split("/")) == ["t001", "z1", "z001", "z234", "t001-z1234-x002"]
    small = FanoutTree((2, 3), FanoutChunkKeyEncoding(1000), ("y", "x"))
    assert small.labelled(["0", "001", "0", "002"]) == ["y001", "y001-x002"]
