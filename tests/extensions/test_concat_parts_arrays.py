"""Reads of concat-parts arrays through zarr equal what was written, on every zarr we support.

zarr 3.3 changed how sharded arrays read part of a shard (``Store.get_ranges``); a wrapper
that let that call reach the inner store returned wrong values with no error. These
properties cover the paths zarr takes: whole and partial reads, sharded and not, with parts
before and after the main one, compressed and not.
"""

from __future__ import annotations

import asyncio

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import ZstdCodec
from zarr.storage import MemoryStore

import zarrfuse

PREFIX = [{"key_suffix": ".head", "size": 16}, {"key_suffix": ""}]
SUFFIX = [{"key_suffix": ""}, {"key_suffix": ".crc", "size": 4}]
BOTH = [{"key_suffix": ".h", "size": 8}, {"key_suffix": ""}, {"key_suffix": ".t", "size": 8}]
SHAPE = (96, 80)


@st.composite
def selections(draw):
    """A basic-index selection of the array: slices with steps, or single rows/columns."""
    out = []
    for n in SHAPE:
        start = draw(st.integers(0, n - 1))
        stop = draw(st.integers(start + 1, n))
        out.append(slice(start, stop, draw(st.sampled_from([1, 1, 2, 3]))))
    return tuple(out)


async def _stored_keys(store: MemoryStore) -> list[str]:
    return [key async for key in store.list()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.sampled_from([PREFIX, SUFFIX, BOTH]),
    sharded=st.booleans(),
    compressed=st.booleans(),
    where=st.lists(selections(), min_size=1, max_size=4),
)
def test_reads_equal_the_written_values(parts, sharded, compressed, where):
    data = (np.arange(np.prod(SHAPE), dtype="uint16") * 7 % 65521).reshape(SHAPE)
    store = MemoryStore()
    array = zarrfuse.create_array(
        store, shape=SHAPE, dtype="uint16", chunks=(16, 16),
        shards=(32, 48) if sharded else None,
        compressors=[ZstdCodec(level=1)] if compressed else None,
        storage_transformers=[{"name": "concat-parts", "configuration": {"parts": parts}}],
    )
    array[...] = data
    stored = asyncio.run(_stored_keys(store))
    for part in parts:  # every chunk written went to every part
        assert any(k.endswith(part["key_suffix"]) and "/c/" in f"/{k}" for k in stored)
    reopened = zarrfuse.open_array(store, mode="r")
    np.testing.assert_array_equal(reopened[...], data)
    for selection in where:
        np.testing.assert_array_equal(reopened[selection], data[selection])
