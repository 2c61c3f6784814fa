"""The versions of one whole-image file: what each handle was shown, so no read mixes two
versions of a tile (why: docs/views.md, 'When another program changes the store'). A version
too big to keep (KEPT_BYTES, SERVED_CHUNKS) follows the store instead.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from zarrfuse.errors import Stale

__all__ = ["KEPT_BYTES", "ChunkKey", "ImageVersions"]

Coords = tuple[int, ...]
ChunkKey = tuple[int, Coords]  # level, chunk coordinates

KEPT_BYTES = 64 << 20
"""Decoded chunks an image keeps for the handles of its older versions, at most."""
SERVED_CHUNKS = 100_000
"""Chunks a version remembers having served (about 13 MB of keys), at most: past that it
follows the store."""
LOOKUP_TO_OPEN = 2.0
"""Seconds within which an open of a version follows the lookup that showed it."""


@dataclass
class _Version:
    """What the handles of one version of the image were shown."""

    handles: int = 0
    served: set[ChunkKey] = field(default_factory=set)
    """The chunks read through them: the kernel may hold their tiles' pages."""
    changed: set[ChunkKey] = field(default_factory=set)
    """(level, stored coords) of the chunks changed since this version."""
    kept: dict[ChunkKey, np.ndarray] = field(default_factory=dict)
    """Changed chunks as this version's handles were served them."""
    following: bool = False
    """Its pages are dropped at each change and it reads the newest chunks."""


class ImageVersions:
    """The versions of the image ``name``; ``stored_key`` maps a chunk to the stored chunk
    (the shard) that holds it."""

    def __init__(self, name: str, stored_key: Callable[[ChunkKey], ChunkKey]) -> None:
        self._name = name
        self._stored_key = stored_key
        self.version = 0
        """The version new opens read (``change`` counts them)."""
        self._versions: dict[int, _Version] = {}
        """The current version, and older ones handles read (or an open may follow a
        lookup of)."""
        self._generations: dict[ChunkKey, int] = {}
        """(level, stored coords) -> how often that chunk changed: decoded chunks are kept
        under it, so unchanged chunks stay decoded across a change."""
        self._kept_bytes = 0
        self._to_drop: set[int] = set()
        """Versions whose pages the kernel must drop (``settle``)."""
        self._looked_up: dict[int, float] = {}
        """Version -> when a lookup last showed it (``opened``)."""

    def generation(self, key: ChunkKey) -> int:
        return self._generations.get(self._stored_key(key), 0) if self._generations else 0

    # --- handles ---------------------------------------------------------------------

    def looked_up(self) -> int:
        """The version a lookup of the file's name shows: the current one."""
        self._looked_up[self.version] = time.monotonic()
        return self.version

    def opened(self, version: int) -> None:
        """A handle of ``version`` opens. An older version is opened only just after a
        lookup showed it (the kernel's open after its lookup, a change between them);
        otherwise ESTALE, and the kernel looks the name up again and opens that."""
        if version != self.version and not self._just_looked_up(version):
            raise Stale(f"{self._name}: version {version} changed since it was looked up")
        self._versions.setdefault(version, _Version()).handles += 1

    def closed(self, version: int) -> None:
        """A handle of ``version`` closed: the last of an old one lets go of what it kept."""
        entry = self._versions.get(version)
        if entry is not None:
            entry.handles -= 1
            if entry.handles <= 0 and version != self.version:
                self._retire(version)

    def _just_looked_up(self, version: int) -> bool:
        return time.monotonic() - self._looked_up.get(version, -LOOKUP_TO_OPEN) < LOOKUP_TO_OPEN

    def _current(self) -> _Version:
        """The current version: what the kernel holds of it outlives its handles (a
        read-only mount's pages are kept for the next open)."""
        return self._versions.setdefault(self.version, _Version())

    # --- reads -----------------------------------------------------------------------

    def as_served(self, version: int | None, decoded: dict[ChunkKey, np.ndarray]) -> None:
        """``decoded`` (the newest chunks) as the handles of ``version`` (None: the
        current one) are shown them: a chunk changed since as they were served it first.
        Called with no await between it and the reply: what it keeps is what was sent."""
        if version is None or version == self.version:
            entry = self._current()
            if not entry.following:
                entry.served.update(decoded)
                if len(entry.served) > SERVED_CHUNKS:
                    self._follow(self.version, entry)
            return
        found = self._versions.get(version)
        if found is None or found.following:
            return
        entry = found
        entry.served.update(decoded)
        if len(entry.served) > SERVED_CHUNKS:  # its pages are dropped at the next change
            self._follow(version, entry)
            return
        for key in decoded:
            kept = entry.kept.get(key)
            if kept is not None:
                decoded[key] = kept
            elif self._stored_key(key) in entry.changed:  # decoded as it changed
                self._keep(entry, key, decoded[key])

    # --- changes ---------------------------------------------------------------------

    def change(self, changed: set[ChunkKey],
               decoded: Callable[[ChunkKey, int], np.ndarray | None]) -> None:
        """The chunks ``changed`` (level, stored coords) changed: each version keeps them
        as its handles were served them (``decoded(key, generation)``: still decoded), or
        follows the store; new opens get a new version."""
        for version, entry in self._versions.items():
            if entry.following:
                self._to_drop.add(version)
                continue
            entry.changed |= changed
            for key in entry.served:
                if key in entry.kept or self._stored_key(key) not in changed:
                    continue
                value = decoded(key, self.generation(key))
                if value is None or not self._keep(entry, key, value):
                    self._follow(version, entry)
                    break
        for key in changed:
            self._generations[key] = self._generations.get(key, 0) + 1
        self._retire(self.version)
        self.version += 1

    def drop(self) -> None:
        """Every decoded chunk is forgotten: every version follows the store."""
        for version, entry in self._versions.items():
            self._follow(version, entry)
        self._retire(self.version)
        self.version += 1

    async def settle(self, drop: Callable[[int], Awaitable[None]]) -> None:
        """After a change: ``drop(version)`` makes the kernel drop the pages of the
        versions that follow the store (the others keep theirs)."""
        while self._to_drop:
            await drop(self._to_drop.pop())

    def _keep(self, entry: _Version, key: ChunkKey, value: np.ndarray) -> bool:
        if self._kept_bytes + value.nbytes > KEPT_BYTES:
            return False
        entry.kept[key] = value
        self._kept_bytes += value.nbytes
        return True

    def _follow(self, version: int, entry: _Version) -> None:
        """``entry`` keeps nothing more: its pages are dropped now and at each change."""
        entry.following = True
        self._kept_bytes -= sum(value.nbytes for value in entry.kept.values())
        entry.kept.clear()
        entry.served.clear()
        self._to_drop.add(version)

    def _retire(self, version: int) -> None:
        """``version`` and older ones that no handle reads and no open can follow a
        lookup of are forgotten (the kernel's pages of them are read by nobody)."""
        for old in [v for v, e in self._versions.items()
                    if v <= version and e.handles <= 0 and not self._just_looked_up(v)]:
            self._follow(old, self._versions.pop(old))
            self._to_drop.discard(old)
        self._looked_up = {v: t for v, t in self._looked_up.items()
                           if v in self._versions or self._just_looked_up(v)}
