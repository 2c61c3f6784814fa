"""What is kept of a shard between reads, and when it is let go: never an index or bytes of
another version of the shard than the one a reader is about to read."""

from __future__ import annotations

import numpy as np

from zarrfuse.filesystem.chunks.recently_used import FOR_EVER
from zarrfuse.filesystem.chunks.shard_indexes import ShardIndexes
from zarrfuse.storage.base import Stat

TABLE = np.array([[0, 10], [10, 10], [20, 10]], dtype=np.uint64)


def test_an_index_read_while_the_shard_changed_is_not_kept():
    indexes = ShardIndexes(FOR_EVER)
    changes = indexes.changes  # a reader starts fetching
    indexes.drop((0,))  # a commit of the shard lands meanwhile
    indexes.keep((0,), TABLE, None, changes)
    assert indexes.get((0,), None) is None


def test_an_index_of_another_version_than_the_listing_says_is_not_used():
    indexes = ShardIndexes(FOR_EVER)
    indexes.keep((0,), TABLE, Stat(30, 1), indexes.changes)
    assert indexes.get((0,), Stat(30, 1)) is TABLE
    assert indexes.get((0,), Stat(31, 2)) is None  # rewritten since
    assert indexes.get((0,), Stat(30, 1)) is None  # and let go


def test_a_kept_span_serves_the_rows_it_holds_and_leaves_once_all_are_taken():
    indexes = ShardIndexes(FOR_EVER)
    changes = indexes.changes
    indexes.keep((0,), TABLE, None, changes)
    indexes.fetched((0,), {0, 1, 2}, changes, (0, b"a" * 10 + b"b" * 10 + b"c" * 10), {1, 2})
    assert indexes.take((0,), None, [(1, 10, 20)]) == (0, b"a" * 10 + b"b" * 10 + b"c" * 10)
    assert indexes.take((0,), None, [(0, 0, 40)]) is None  # past what it holds
    assert indexes.take((0,), None, [(2, 20, 30)]) is not None  # the last untaken row
    assert indexes.take((0,), None, [(2, 20, 30)]) is None  # gone
    assert indexes.unfetched((0,), {0, 1, 2}) == set()


def test_a_drop_lets_go_of_the_index_and_the_kept_bytes():
    indexes = ShardIndexes(FOR_EVER)
    changes = indexes.changes
    indexes.keep((0,), TABLE, None, changes)
    indexes.fetched((0,), {0}, changes, (0, b"x" * 30), {1, 2})
    indexes.drop((0,))
    assert indexes.get((0,), None) is None
    assert indexes.take((0,), None, [(1, 10, 20)]) is None


def test_fetching_locks_are_let_go_with_their_last_user():
    indexes = ShardIndexes(FOR_EVER)
    with indexes.fetching((1, 2)):
        assert (1, 2) in indexes._fetching
    assert indexes._fetching == {}
