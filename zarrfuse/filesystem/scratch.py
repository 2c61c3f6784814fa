"""Scratch files: the temporary files that tools write before renaming them into place.

rsync writes ``.name.XXXXXX`` and renames it; editors save to ``name~``, ``.name.swp`` or
``name.tmp``. Such names are not chunks, so they are never stored: the daemon holds them in
memory, bounded in total, until they are renamed onto a chunk name (which commits them) or
deleted, and they are gone at unmount. Only names shaped like temp files are accepted, so
that a stray ``notes.txt`` is refused (EPERM) instead of silently vanishing at unmount.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zarrfuse.errors import NoSpace
from zarrfuse.filesystem.write_buffer import WriteBuffer

__all__ = ["NoSpace", "ScratchArea", "is_scratch_name"]

_TEMP_PREFIXES = (".", "#")
_TEMP_SUFFIXES = ("~", ".tmp", ".temp", ".swp", ".swx", ".part", ".partial", ".bak", "#")


def is_scratch_name(name: str) -> bool:
    """Whether ``name`` looks like a temporary file (hidden, backup, swap or partial)."""
    return name.startswith(_TEMP_PREFIXES) or name.endswith(_TEMP_SUFFIXES)


@dataclass
class ScratchData:
    """One scratch file's bytes and time; ``time_set``: the time was set (utimens, as rsync
    does before renaming the file onto its name), so it passes to the chunk it becomes."""

    data: WriteBuffer = field(default_factory=WriteBuffer)
    mtime_ns: int = 0
    time_set: bool = False


class ScratchArea:
    """In-memory scratch files keyed by any hashable file identity, bounded in bytes."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._files: dict[object, ScratchData] = {}

    @property
    def used_bytes(self) -> int:
        return sum(len(f.data) for f in self._files.values())

    @property
    def enabled(self) -> bool:
        return self.limit_bytes > 0

    def get(self, key: object) -> ScratchData | None:
        return self._files.get(key)

    def create(self, key: object, mtime_ns: int) -> ScratchData:
        scratch = self._files[key] = ScratchData(mtime_ns=mtime_ns)
        return scratch

    def remove(self, key: object) -> ScratchData | None:
        return self._files.pop(key, None)

    def move(self, old: object, new: object) -> None:
        self._files[new] = self._files.pop(old)

    def names(self) -> list[object]:
        """The keys of every scratch file, as a list (files may come and go meanwhile)."""
        return list(self._files)

    def reserve(self, old_size: int, new_size: int) -> None:
        """Refuse growing a scratch file past the area's limit (ENOSPC)."""
        if new_size > old_size and self.used_bytes + new_size - old_size > self.limit_bytes:
            raise NoSpace(
                f"scratch files would hold {self.used_bytes + new_size - old_size} bytes, "
                f"over the limit of {self.limit_bytes}"
            )
