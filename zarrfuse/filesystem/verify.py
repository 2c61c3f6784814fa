"""Checking a chunk before it is stored: does it decode with the array's own codecs?

zarr-python already knows how to decode every codec chain, so verification hands the bytes to
zarr: a throw-away in-memory array with the same metadata holds just this chunk, and reading
the chunk's region decodes it (for sharded arrays, every inner chunk of the shard).
"""

from __future__ import annotations

import json
from typing import Any

import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import MemoryStore

from zarrfuse.api.regions import chunk_region
from zarrfuse.errors import WriteRefusedError

__all__ = ["verify_chunk"]


def verify_chunk(metadata: dict[str, Any], coords: tuple[int, ...], data: bytes) -> None:
    """Raise WriteRefusedError unless ``data`` decodes as chunk ``coords``. Blocking."""
    document = {k: v for k, v in metadata.items() if k != "storage_transformers"}
    document["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": "/"}}
    store = MemoryStore()
    prototype = default_buffer_prototype()
    key = "/".join(["c", *map(str, coords)])
    sync(store.set("zarr.json", prototype.buffer.from_bytes(json.dumps(document).encode())))
    sync(store.set(key, prototype.buffer.from_bytes(data)))
    array = zarr.open_array(store, mode="r")
    stored_shape = array.shards or array.chunks  # one stored object: the shard, if sharded
    region = chunk_region(coords, stored_shape, array.shape)
    try:
        array[region]
    except Exception as e:
        raise WriteRefusedError(
            f"chunk {key} does not decode with the array's codecs ({type(e).__name__}: {e}); "
            "nothing was written"
        ) from e
