"""Opening a chunk's parts and checking them against ``concat-parts``: in a worker thread, or
at once where the backend will not wait (docs/performance.md, "No worker thread to open")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from zarrfuse.extensions.byte_ranges import pieces_for_span
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.filesystem.chunks.chunk_caches import OpenChunk
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.storage.base import Backend, PartReader, Stat

__all__ = ["NOT_CACHED", "ChunkKeys", "NotCached", "PartOpening", "read_parts", "read_span"]


class ChunkKeys(NamedTuple):
    """A chunk's grid coordinates, its key and its parts' keys."""

    coords: tuple[int, ...]
    key: str
    parts: list[str]


class NotCached:
    """An open that would have waited on storage: do it in a worker thread instead."""


NOT_CACHED = NotCached()


class PartOpening:
    """Opens the parts of one array's chunks through its backend."""

    def __init__(self, backend: Backend, parts: ConcatParts, counters: Counters) -> None:
        self.backend = backend
        self.parts = parts
        self.counters = counters

    def open(self, chunk: ChunkKeys, listed: Sequence[Stat | None] | None) -> OpenChunk | None:
        """The chunk's parts, checked; None if the chunk is absent. Blocking. ``listed``:
        the parts' stats from a fresh listing, if there is one."""
        return self._checked(chunk, self.backend.open_reader(chunk.parts, _sizes(listed)))

    def open_nowait(
        self, chunk: ChunkKeys, listed: Sequence[Stat | None] | None
    ) -> OpenChunk | NotCached | None:
        """As :meth:`open` if the backend opens the parts without waiting; else NOT_CACHED."""
        nowait = self.backend.capabilities.open_reader_nowait
        if nowait is None or (reader := nowait(chunk.parts, _sizes(listed))) is None:
            return NOT_CACHED
        return self._checked(chunk, reader)

    def _checked(self, chunk: ChunkKeys, reader: PartReader) -> OpenChunk | None:
        """Raises PartsError for missing parts or a sized part of the wrong size."""
        self.counters.store["open"] += len(chunk.parts)
        try:
            sizes = self.parts.checked_sizes(chunk.key, chunk.parts, reader.sizes)
        except BaseException:
            reader.close()
            raise
        if sizes is None:
            reader.close()
            return None
        return OpenChunk(reader, sizes, chunk.coords)


def read_parts(reader: PartReader, pending: Sequence[tuple[int, int, memoryview]]) -> None:
    """Fill each (part, start, view) from the reader, waiting for storage. Blocking."""
    for part, start, view in pending:
        reader.read_into(part, start, view)


def read_span(opened: OpenChunk, start: int, stop: int) -> bytearray:
    """The chunk's bytes ``[start, stop)`` (its parts laid end to end), waiting for storage.
    Blocking."""
    out = bytearray(stop - start)
    view, pending, at = memoryview(out), [], 0
    for piece in pieces_for_span(opened.sizes, start, stop):
        pending.append((piece.part, piece.start, view[at : at + piece.stop - piece.start]))
        at += piece.stop - piece.start
    read_parts(opened.reader, pending)
    return out


def _sizes(listed: Sequence[Stat | None] | None) -> list[int | None] | None:
    return None if listed is None else [None if s is None else s.size for s in listed]
