"""The storage interface the mount's filesystem talks to: raw key I/O, blocking calls.

Callers run these in worker threads. Three implementations: ``local`` (plain system calls on
the directory behind a ``LocalStore``), ``objects`` (S3 through obstore) and ``stores`` (any
other zarr Store, through zarr's own event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Backend", "PartReader"]


class Backend(Protocol):
    """Key-level access to a store. Keys are full store keys, ``/``-separated."""

    stat_by_listing: bool
    """Whether one chunk's size is better learnt by listing its directory (remote stores)."""

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """Objects directly under ``prefix`` (a directory key, "" for the root): name -> size."""
        ...

    def list_subdirs(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` that may be sub-prefixes ("directories").

        Stores that cannot tell objects from prefixes cheaply may return objects too; callers
        check each name (for a ``zarr.json`` below it) anyway.
        """
        ...

    def size(self, key: str) -> int | None:
        """Size of one object, None if absent."""
        ...

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        """Open a chunk's parts for reading; their sizes are fixed from here on.

        ``sizes`` are the parts' sizes from a fresh listing, if the caller has one: backends
        that would pay a request per part to learn them take these instead.
        """
        ...

    def read_all(self, key: str) -> bytes | None:
        """A whole object, None if absent."""
        ...

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> None:
        """Replace an object with ``pieces`` joined, atomically: readers see the old or the
        new bytes, never a mix."""
        ...

    def delete(self, key: str) -> None:
        """Remove an object; absent is fine."""
        ...

    def close(self) -> None:
        """Release what the backend holds (threads, connections); called at unmount."""
        ...


class PartReader(Protocol):
    """Open parts of one chunk. ``sizes`` holds None for a part that is absent."""

    sizes: tuple[int | None, ...]

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        """Copy what is available without waiting for I/O (page cache); returns the count."""
        ...

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        """Fill ``out`` from the part at ``start``, waiting for storage as needed."""
        ...

    def release(self) -> None:
        """The last user let go (the reader may stay cached): drop read buffers."""
        ...

    def close(self) -> None: ...
