"""A zarr store whose writes go through the mount's backend.

An OME-Zarr pyramid's lower levels are written through zarr after a write to the full
resolution (``api.pyramid``), and zarr stores the bytes with its store's own ``set``: on an
object store a PUT with the client's timeouts, which may land after the close was answered
EIO, and on a local directory a file written in place. Routing ``set`` and ``delete``
through the backend gives those writes what raw chunk files have: atomic replacement on
local stores, and on object stores a PUT bounded by ``--store-timeout`` that never lands
after an EIO (``signed_put``). Reads are the wrapped store's.
"""

from __future__ import annotations

import asyncio

from zarr.abc.store import Store
from zarr.storage import WrapperStore

from zarrfuse.storage.base import Backend
from zarrfuse.zarr_compat import Buffer

__all__ = ["BackendWrites"]


class BackendWrites(WrapperStore[Store]):
    """``store`` with ``set`` and ``delete`` done by ``backend`` (same keys)."""

    def __init__(self, store: Store, backend: Backend) -> None:
        super().__init__(store)
        self._backend = backend

    def _with_store(self, store: Store) -> BackendWrites:
        return type(self)(store, self._backend)

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        data = memoryview(value.to_bytes())
        await asyncio.to_thread(self._backend.write, key, [data])

    async def delete(self, key: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._backend.delete, key)
