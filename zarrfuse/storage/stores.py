"""Any other zarr Store (zip, fsspec, ...) as mount storage, through ``zarr.core.sync.sync``.

``sync`` blocks the calling worker thread, never the trio thread.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Sequence

from zarr.abc.store import RangeByteRequest, Store
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from zarrfuse.storage.base import PartReader

__all__ = ["StoreBackend", "StorePartReader"]


class StorePartReader:
    """Parts of a chunk in any zarr Store; every read is a ranged request."""

    def __init__(self, backend: StoreBackend, keys: Sequence[str]) -> None:
        self.backend = backend
        self.keys = list(keys)
        self.sizes = tuple(backend.size(k) for k in self.keys)

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        return 0  # every store request may wait

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        out[:] = self.backend.read(self.keys[part], start, start + len(out))

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class StoreBackend:
    """Any zarr Store, driven from worker threads through zarr's own event loop."""

    stat_by_listing = False  # its listings cost a request per entry

    def __init__(self, store: Store) -> None:
        self.store = store
        self.prototype = default_buffer_prototype()

    async def _list_sizes(self, prefix: str) -> dict[str, int]:
        names = [n async for n in self.store.list_dir(prefix)]
        out = {}
        for name in names:
            key = f"{prefix}/{name}" if prefix else name
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):  # a sub-prefix
                out[name] = await self.store.getsize(key)
        return out

    def list_sizes(self, prefix: str) -> dict[str, int]:
        return sync(self._list_sizes(prefix.strip("/")))

    def list_subdirs(self, prefix: str) -> list[str]:
        # zarr's Store API lists objects and prefixes alike; telling them apart would cost a
        # request per name, and the caller looks for NAME/zarr.json anyway.
        prefix = prefix.strip("/")

        async def names() -> list[str]:
            return [n async for n in self.store.list_dir(prefix)]

        return sync(names())

    def size(self, key: str) -> int | None:
        try:
            return sync(self.store.getsize(key))
        except (FileNotFoundError, IsADirectoryError):
            return None

    def read(self, key: str, start: int, stop: int) -> bytes:
        buf = sync(self.store.get(key, self.prototype, RangeByteRequest(start, stop)))
        if buf is None or len(buf) != stop - start:
            got = "nothing" if buf is None else f"{len(buf)} bytes"
            raise OSError(errno.EIO, f"{key}: asked for {stop - start} bytes, got {got}")
        return buf.to_bytes()

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        return StorePartReader(self, keys)

    def read_all(self, key: str) -> bytes | None:
        buf = sync(self.store.get(key, self.prototype))
        return None if buf is None else buf.to_bytes()

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> None:
        # One set() per part: a single PUT on object stores, temp-then-rename on local ones.
        sync(self.store.set(key, self.prototype.buffer.from_bytes(b"".join(pieces))))

    def delete(self, key: str) -> None:
        sync(self.store.delete(key))

    def close(self) -> None:
        pass  # the store belongs to zarr's event loop, which closes with the process
