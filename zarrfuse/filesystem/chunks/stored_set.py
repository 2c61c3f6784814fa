"""Which chunk coordinates are stored, one dimension at a time (``values(done)``), learnt
from listings decoded by the array's own key encoding: a sparse grid costs what is stored.
Why: docs/performance.md, "Listings kept"."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zarrfuse.extensions.chunk_keys import decode_chunk_key, encode_chunk_key
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.storage.base import Backend
from zarrfuse.zarr_compat import ChunkKeyEncoding

if TYPE_CHECKING:
    from zarrfuse.filesystem.chunks.counters import Counters

__all__ = ["KeyShape", "StoredSet", "stored_prefix_values"]

CACHED_ANSWERS = 4096
CACHED_SUBDIRS = 256


def _parts(key: str) -> list[str]:
    return key.split("/")


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True)
class Walk:
    """Where the keys of ``(*done, v, 0, ...)`` live: directory ``base`` (components), then
    ``depths`` components for ``v``, then the fixed ``rest`` (the later coordinates' zeros)."""

    base: tuple[str, ...]
    depths: tuple[int, int]
    rest: tuple[str, ...]


@dataclass(frozen=True)
class KeyShape:
    """How an encoding lays out the keys of one chunk grid. Pure: encodes sample keys only.

    Assumes what every ``/``-path encoding zarr and zarrfuse know does: components that the
    keys of the smallest and largest value of a coordinate share are shared by all values.
    """

    encoding: ChunkKeyEncoding
    grid: tuple[int, ...]

    def key(self, coords: tuple[int, ...]) -> list[str]:
        return _parts(encode_chunk_key(self.encoding, coords))

    @property
    def flat(self) -> bool:
        """Whether every chunk key is in one directory (``.`` separators)."""
        tops = tuple(n - 1 for n in self.grid)
        samples = [(0,) * len(self.grid), tops, tuple(n // 2 for n in self.grid)]
        return len({tuple(self.key(c)[:-1]) for c in samples}) == 1

    def walk(self, done: tuple[int, ...]) -> Walk:
        """Where the values of coordinate ``len(done)`` are, below the chunks ``done``."""
        zeros = (0,) * (len(self.grid) - len(done) - 1)
        low = self.key((*done, 0, *zeros))
        high = self.key((*done, self.grid[len(done)] - 1, *zeros))
        n_rest = len(low) - len(self.key((*done, 0)))
        n_base = min(_common_prefix(low, high), len(low) - n_rest - 1)
        lengths = sorted({len(low) - n_rest - n_base, len(high) - n_rest - n_base})
        rest = tuple(low[len(low) - n_rest :]) if n_rest else ()
        return Walk(tuple(low[:n_base]), (lengths[0], lengths[-1]), rest)

    def decode(self, parts: Iterable[str]) -> tuple[int, ...] | None:
        """The coordinates of a key, None if it is not a canonical chunk key of this grid."""
        try:
            coords = decode_chunk_key(self.encoding, "/".join(parts), len(self.grid))
        except ValueError:
            return None
        return coords if all(map(int.__lt__, coords, self.grid)) else None  # ndim checked


def stored_prefix_values(coords: Iterable[tuple[int, ...]], done: tuple[int, ...]) -> list[int]:
    """Sorted values ``v`` such that some of the sorted ``coords`` starts with ``(*done, v)``."""
    coords = list(coords)
    start = bisect_left(coords, done)
    values: dict[int, None] = {}
    for c in coords[start:]:
        if c[: len(done)] != done:
            break
        values[c[len(done)]] = None
    return list(values)


ListNames = Callable[[str], Awaitable[Collection[str]]]


class StoredSet:
    """Stored values per coordinate prefix, for one array, from listings of its store."""

    def __init__(
        self,
        *,
        shape: KeyShape,
        prefix: str,
        part_suffixes: list[str],
        list_files: ListNames,
        backend: Backend,
        run: Callable[..., Awaitable[list[str]]],
        trust: Trust,
        counters: Counters,
    ) -> None:
        """``trust``: how long answers are believed."""
        self.shape = shape
        self._prefix = prefix  # the array's directory in the store, "" or ending in "/"
        self._suffixes = sorted(set(part_suffixes), key=len)
        self._list_files = list_files
        self._backend = backend
        self._run = run
        self._trust = trust
        self._counters = counters
        self._flat = shape.flat if shape.grid and all(shape.grid) else False  # no chunk: no key
        self._answers: OrderedDict[tuple[int, ...], tuple[float, list[int]]] = OrderedDict()
        self._subdirs: OrderedDict[str, tuple[float, set[str]]] = OrderedDict()
        self._flat_coords: tuple[float, list[tuple[int, ...]]] | None = None
        self._changes = 0
        """Changes noted (``note``, ``drop``): an answer asked across one is not kept."""

    # --- caches --------------------------------------------------------------------------

    def _fresh(self, learnt: float) -> bool:
        return not self._trust.outlived(learnt)

    async def _subdir_names(self, directory: str) -> set[str]:
        cached = self._subdirs.get(directory)
        if cached is not None and self._fresh(cached[0]):
            self._subdirs.move_to_end(directory)
            return cached[1]
        self._counters.store["list"] += 1
        now, changes = self._trust.clock(), self._changes
        names = set(await self._run(self._backend.list_subdirs, directory))
        if changes == self._changes:
            self._subdirs[directory] = (now, names)
            if len(self._subdirs) > CACHED_SUBDIRS:
                self._subdirs.popitem(last=False)
        return names

    def _directory(self, parts: Iterable[str]) -> str:
        return (self._prefix + "/".join(parts)).rstrip("/")

    def _stems(self, names: Iterable[str]) -> Iterable[str]:
        """Chunk key names with a concat-parts suffix taken off (each name as it is, too)."""
        for name in names:
            for suffix in self._suffixes:
                if name.endswith(suffix):
                    yield name[: len(name) - len(suffix)] if suffix else name

    # --- answers -------------------------------------------------------------------------

    async def values(self, done: tuple[int, ...]) -> list[int]:
        """Sorted values ``v`` of coordinate ``len(done)`` such that some stored chunk starts
        with ``(*done, v)``. Do not change the list returned."""
        cached = self._answers.get(done)
        if cached is not None and self._fresh(cached[0]):
            self._answers.move_to_end(done)
            return cached[1]
        now, changes = self._trust.clock(), self._changes
        values = await (self._flat_values(done) if self._flat else self._nested_values(done))
        if changes == self._changes:
            self._answers[done] = (now, values)
            if len(self._answers) > CACHED_ANSWERS:
                self._answers.popitem(last=False)
        return values

    async def _flat_values(self, done: tuple[int, ...]) -> list[int]:
        """From the one directory's listing, decoded once per listing TTL, not per directory
        shown."""
        flat = self._flat_coords
        if flat is None or not self._fresh(flat[0]):
            now, changes = self._trust.clock(), self._changes
            directory = self.shape.key((0,) * len(self.shape.grid))[:-1]
            names = await self._list_files(self._directory(directory))
            decoded = (self.shape.decode((*directory, stem)) for stem in self._stems(names))
            flat = (now, sorted({c for c in decoded if c is not None}))
            if changes == self._changes:
                self._flat_coords = flat
        return stored_prefix_values(flat[1], done)

    async def _nested_values(self, done: tuple[int, ...]) -> list[int]:
        walk = self.shape.walk(done)
        last = len(done) == len(self.shape.grid) - 1
        shallowest, deepest = walk.depths
        found: set[int] = set()
        level: list[tuple[str, ...]] = [walk.base]
        for depth in range(1, deepest + 1):
            below: list[tuple[str, ...]] = []
            for path in level:
                directory = self._directory(path)
                dirs = await self._subdir_names(directory) if not last or depth < deepest else ()
                if last and depth >= shallowest:
                    names = self._stems(await self._list_files(directory))
                    self._collect(found, done, ((*path, n) for n in names))
                if not last and depth >= shallowest:
                    dirs = {n for n in dirs if not self._collect(found, done, [(*path, n)], walk)}
                below.extend((*path, n) for n in sorted(dirs) if depth < deepest)
            level = below
        return sorted(found)

    def _collect(
        self,
        found: set[int],
        done: tuple[int, ...],
        candidates: Iterable[tuple[str, ...]],
        walk: Walk | None = None,
    ) -> bool:
        """Add the values of the candidate keys (completed with ``walk.rest``) that decode to
        chunks below ``done``; True if any did."""
        hit = False
        for parts in candidates:
            coords = self.shape.decode((*parts, *walk.rest) if walk else parts)
            if coords is not None and coords[: len(done)] == done:
                found.add(coords[len(done)])
                hit = True
        return hit

    # --- the mount's own changes ---------------------------------------------------------

    def note(self, coords: tuple[int, ...], stored: bool) -> None:
        """The mount stored (or deleted) the chunk ``coords``: cached answers follow."""
        if not coords:
            return
        self._changes += 1
        if stored:
            self._note_directories(coords)
        self._note_flat(coords, stored)
        for d in range(len(coords)):
            cached = self._answers.get(coords[:d])
            if cached is None:
                continue
            if not stored:  # whether siblings remain is for the listings to say
                del self._answers[coords[:d]]
            elif coords[d] not in cached[1]:
                insort(cached[1], coords[d])

    def drop_all(self) -> None:
        """Every answer is asked again (a store directory appeared)."""
        self._changes += 1
        self._answers.clear()
        self._subdirs.clear()
        self._flat_coords = None

    def drop(self, coords: tuple[int, ...]) -> None:
        """The chunk ``coords`` changed another way: cached answers about it are asked again."""
        self._changes += 1
        for d in range(len(coords)):
            self._answers.pop(coords[:d], None)
        self._flat_coords = None
        parts = _parts(self._prefix + encode_chunk_key(self.shape.encoding, coords))
        for n in range(1, len(parts) - 1):
            self._subdirs.pop("/".join(parts[:n]), None)

    def _note_flat(self, coords: tuple[int, ...], stored: bool) -> None:
        if self._flat_coords is None:
            return
        listed = self._flat_coords[1]
        at = bisect_left(listed, coords)
        present = at < len(listed) and listed[at] == coords
        if stored and not present:
            listed.insert(at, coords)
        elif not stored and present:
            del listed[at]

    def _note_directories(self, coords: tuple[int, ...]) -> None:
        parts = _parts(self._prefix + encode_chunk_key(self.shape.encoding, coords))
        for n in range(1, len(parts) - 1):
            cached = self._subdirs.get("/".join(parts[:n]))
            if cached is not None:
                cached[1].add(parts[n])

