"""LocalBackend's part writes: every byte lands, in order, whatever the pieces look like."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from zarrfuse.storage.local import WRITE_STEP, LocalBackend

piece_sizes = st.sampled_from([0, 1, 7, 4096, WRITE_STEP - 1, WRITE_STEP, WRITE_STEP + 3, 3 << 20])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(piece_sizes, max_size=8))
def test_write_stores_the_pieces_joined(tmp_path_factory, sizes):
    root = tmp_path_factory.mktemp("store")
    pieces = [os.urandom(n) for n in sizes]
    LocalBackend(root).write("c/0/1", [memoryview(p) for p in pieces])
    assert (root / "c/0/1").read_bytes() == b"".join(pieces)
    assert [p.name for p in (root / "c/0").iterdir()] == ["1"]  # no temp file left behind


def test_write_of_more_pieces_than_one_writev_takes(tmp_path: Path):
    pieces = [os.urandom(3) for _ in range(3 * os.sysconf("SC_IOV_MAX") + 5)]
    LocalBackend(tmp_path).write("k", [memoryview(p) for p in pieces])
    assert (tmp_path / "k").read_bytes() == b"".join(pieces)
