"""Which values lead to stored chunks: the stored set against brute force, over real
directories laid out by every chunk key encoding; and the view's listing of stored children."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.extensions.encodings import (
    DEFAULT,
    DEFAULT_DOT,
    FANOUT_100,
    SUFFIX_SHARD_V2,
    SUFFIX_X,
    SUFFIX_X_FANOUT,
    V2,
    V2_SLASH,
)
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding, encode_chunk_key
from zarrfuse.extensions.transformers import ConcatParts, Part
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.chunks.stored_set import KeyShape
from zarrfuse.filesystem.tree.fanout_tree import DirPosition, FanoutTree
from zarrfuse.storage.local import LocalBackend

ENCODINGS = [DEFAULT, DEFAULT_DOT, V2, V2_SLASH, FANOUT_100, SUFFIX_X, SUFFIX_X_FANOUT,
             SUFFIX_SHARD_V2]

ROOT = DirPosition()
"""The directory ``c``."""


@st.composite
def sparse_grids(draw):  # type: ignore[no-untyped-def]
    """A grid (some dimensions past one fanout group) and a few stored coordinates in it."""
    ndim = draw(st.integers(1, 3))
    grid = tuple(draw(st.sampled_from([1, 3, 150, 12_000])) for _ in range(ndim))
    coords = st.tuples(*(st.integers(0, n - 1) for n in grid))
    return grid, draw(st.lists(coords, max_size=12, unique=True))


def brute_values(stored, done):  # type: ignore[no-untyped-def]
    return sorted({c[len(done)] for c in stored if c[: len(done)] == done})


def source_for(root: Path, encoding, grid, parts=None) -> StoredChunks:  # type: ignore[no-untyped-def]
    return StoredChunks(MountContext(LocalBackend(root), Trust(60.0)), array_path="arr",
                        encoding=encoding, parts=parts, grid=grid)


def store(root: Path, encoding, coords, suffixes=("",)) -> None:  # type: ignore[no-untyped-def]
    for suffix in suffixes:
        path = root / "arr" / (encode_chunk_key(encoding, coords) + suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


@settings(max_examples=60, deadline=None)
@given(case=sparse_grids(), encoding=st.sampled_from(ENCODINGS), split=st.booleans())
def test_stored_values_match_brute_force(case, encoding, split):
    grid, stored = case
    suffixes = ("", ".1") if split else ("",)
    parts = ConcatParts((Part("", 1), Part(".1"))) if split else None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "arr").mkdir()
        (root / "arr" / "zarr.json").write_text("{}")  # not a chunk: never a value
        for coords in stored:
            store(root, encoding, coords, suffixes)
        prefixes = {c[:d] for c in stored for d in range(len(grid))} | {()}
        prefixes.add(tuple(n - 1 for n in grid[:-1]))  # maybe nothing stored there

        async def check() -> None:
            source = source_for(root, encoding, grid, parts)
            for done in sorted(prefixes):
                assert await source.listings.stored.values(done) == brute_values(stored, done)

        trio.run(check)


def test_commit_and_delete_through_the_source_update_cached_answers(tmp_path):
    grid = (10**6, 10**6)
    store(tmp_path, DEFAULT, (5, 7))

    async def check() -> None:
        source = source_for(tmp_path, DEFAULT, grid)
        assert await source.listings.stored.values(()) == [5]
        assert await source.listings.stored.values((5,)) == [7]
        lists = source.counters.store["list"]
        await source.writes.commit((123_456, 9), [memoryview(b"y")], durable=False)
        assert await source.listings.stored.values(()) == [5, 123_456]
        assert await source.listings.stored.values((5,)) == [7]
        assert source.counters.store["list"] == lists  # learnt from the commit, not re-listed
        await source.writes.delete((5, 7))
        assert await source.listings.stored.values((5,)) == []

    trio.run(check)


def test_key_shapes_tell_flat_from_nested():
    assert KeyShape(DEFAULT_DOT, (10, 10)).flat and KeyShape(V2, (10, 10)).flat
    assert KeyShape(DEFAULT, (10,)).flat  # 1-D: every key in c/
    assert not KeyShape(DEFAULT, (10, 10)).flat and not KeyShape(FANOUT_100, (1000,)).flat
    walk = KeyShape(FANOUT_100, (10**6, 3)).walk(())
    assert walk.base == ("c",) and walk.depths == (2, 4) and walk.rest == ("0", "00")


# --- the view: children that lead to stored values ----------------------------------------


def positions(tree: FanoutTree, pos: DirPosition = ROOT, path: tuple[str, ...] = ("c",)):  # type: ignore[no-untyped-def]
    """Every non-leaf directory of the (1-D) tree below ``pos``, with its path."""
    if tree.is_leaf(pos):
        return
    yield pos, path
    for name in tree.child_names(pos):
        child = tree.child(pos, name)
        if isinstance(child, DirPosition):
            yield from positions(tree, child, (*path, name))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12_000),
    picks=st.lists(st.integers(0, 11_999), max_size=15),
    mc=st.sampled_from([100, 1000]),
)
def test_stored_child_names_match_the_keys_of_stored_values(size, picks, mc):
    encoding = FanoutChunkKeyEncoding(mc)
    tree = FanoutTree((size,), encoding)
    stored = sorted({v % size for v in picks})
    keys = [encoding.encode_chunk_key((v,)).split("/") for v in stored]
    for pos, path in positions(tree):
        expected = list(dict.fromkeys(
            k[len(path)] for k in keys if tuple(k[: len(path)]) == path
        ))
        assert tree.stored_child_names(pos, stored) == expected, (path, stored)


def test_every_grid_directory_is_still_there_to_look_up():
    tree = FanoutTree((10**12,), FanoutChunkKeyEncoding(1000))
    assert tree.stored_child_names(ROOT, []) == []
    pos = ROOT
    for name in ["3", "999", "999", "999"]:
        pos = tree.child(pos, name)
    assert tree.is_leaf(pos)
    assert list(itertools.islice(tree.child_names(pos), 2)) == ["000", "001"]
