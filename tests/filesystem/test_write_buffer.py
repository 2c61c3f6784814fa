"""WriteBuffer and the writev path keep exactly the bytes a plain bytearray would."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from zarrfuse.extensions.byte_ranges import slice_views
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer
from zarrfuse.storage.file_writes import write_all

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 300), st.binary(max_size=64)),
        st.tuples(st.just("append"), st.binary(min_size=1, max_size=64)),
        st.tuples(st.just("truncate"), st.integers(0, 400)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(initial=st.binary(max_size=100), ops=operations,
       cut=st.tuples(st.integers(0, 500), st.integers(0, 500)))
def test_buffer_matches_bytearray(initial, ops, cut):
    model, buffer = bytearray(initial), WriteBuffer(initial)
    for op in ops:
        if op[0] == "append":
            op = ("write", len(model), op[1])
        if op[0] == "write":
            _, offset, data = op
            if offset > len(model):
                model.extend(bytes(offset - len(model)))
            model[offset : offset + len(data)] = data
            buffer.write(offset, data)
        else:
            size = op[1]
            del model[size:]
            model.extend(bytes(size - len(model)))
            buffer.truncate(size)
        assert len(buffer) == len(model)
    assert b"".join(buffer.pieces()) == model
    start, stop = min(cut), max(cut)
    assert b"".join(slice_views(buffer.pieces(), start, stop)) == model[start:stop]
    assert buffer.read(start, stop - start) == model[start:stop]


@settings(max_examples=50, deadline=None)
@given(pieces=st.lists(st.binary(max_size=5000), max_size=40))
def testwrite_all_writes_every_piece_in_order(tmp_path_factory, pieces):
    path = tmp_path_factory.mktemp("w") / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, [memoryview(p) for p in pieces])
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(pieces)
