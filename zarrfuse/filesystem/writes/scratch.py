"""Scratch files: temp files tools write before renaming them into place (which names count,
and why digit names never do: docs/writing.md, 'Scratch files'). Held in memory, bounded,
never stored; renamed onto a chunk name they are committed; left at unmount, logged.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import re
from dataclasses import dataclass, field

from zarrfuse.errors import FileTooBig, NoSpace, NotFound
from zarrfuse.filesystem.tree.nodes import Node, ScratchFile
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = ["NoSpace", "ScratchArea", "is_scratch_name", "is_vim_probe"]

_TEMP_PREFIXES = (".", "#")
_TEMP_SUFFIXES = ("~", ".tmp", ".temp", ".swp", ".swx", ".part", ".partial", ".bak", "#")
# mkstemp templates: GNU sed's ``sedXXXXXX``, Python tempfile's ``tmpXXXXXXXX`` (maybe with a
# suffix), perl -i's ``XXXXXXXX``.
_TEMPLATE_NAMES = re.compile(
    r"sed[A-Za-z0-9]{6}|tmp[a-z0-9_]{8}(\.[A-Za-z0-9]{1,8})?|[A-Za-z0-9]{8}", re.ASCII
)


def is_scratch_name(name: str, *, exclusive: bool = False) -> bool:
    """Whether ``name`` is a temporary file's: hidden, backup, swap or partial; or, for a
    file created exclusively (``exclusive``: O_EXCL, as mkstemp does), a template's."""
    if name.isdigit():
        return False
    if name.startswith(_TEMP_PREFIXES) or name.endswith(_TEMP_SUFFIXES):
        return True
    return exclusive and _TEMPLATE_NAMES.fullmatch(name) is not None


def is_vim_probe(name: str) -> bool:
    """vim's test file (``4913``, then ``5036``... while taken), made to learn whether a save
    may rename the original away. It is refused: vim then overwrites the original in place,
    the one save that keeps a chunk stored throughout."""
    if not (name.isascii() and name.isdigit()) or name.startswith("0"):
        return False
    return int(name) >= 4913 and (int(name) - 4913) % 123 == 0


@dataclass
class ScratchData:
    """One scratch file's bytes and time; ``time_set``: the time was set (utimens, as rsync
    does before renaming the file onto its name), so it passes to the chunk it becomes."""

    data: WriteBuffer = field(default_factory=WriteBuffer)
    mtime_ns: int = 0
    time_set: bool = False


class ScratchArea:
    """In-memory scratch files, bounded in bytes."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._files: dict[ScratchFile, ScratchData] = {}

    @property
    def enabled(self) -> bool:
        return self.limit_bytes > 0

    def get(self, node: Node) -> ScratchData | None:
        """The bytes of ``node`` if it is a scratch file held here."""
        return self._files.get(node)  # type: ignore[call-overload]  # any node: None

    def held(self, node: ScratchFile) -> ScratchData:
        """The bytes of scratch file ``node``; NotFound once it is gone (renamed, removed)."""
        scratch = self._files.get(node)
        if scratch is None:
            raise NotFound(f"scratch file {node.name!r} is gone")
        return scratch

    def create(self, key: ScratchFile, mtime_ns: int) -> None:
        self._files[key] = ScratchData(mtime_ns=mtime_ns)

    def remove(self, key: ScratchFile) -> None:
        removed = self._files.pop(key, None)
        if removed is not None and len(removed.data) >= GIVE_BACK_BYTES:
            del removed
            _give_back_freed_memory()

    def move(self, old: ScratchFile, new: ScratchFile) -> None:
        self._files[new] = self._files.pop(old)

    def names(self) -> list[ScratchFile]:
        """The keys of every scratch file, as a list (files may come and go meanwhile)."""
        return list(self._files)

    def reserve(self, old_size: int, new_size: int) -> None:
        """Refuse growing a scratch file past the area's limit: EFBIG for a file larger
        than the whole area (it can never fit), else ENOSPC (it may once others go)."""
        if new_size <= old_size:
            return
        if new_size > self.limit_bytes:
            raise FileTooBig(f"a scratch file of {new_size} bytes is over the limit of "
                             f"{self.limit_bytes} for all of them (--scratch-mb)")
        used = sum(len(f.data) for f in self._files.values()) + new_size - old_size
        if used > self.limit_bytes:
            raise NoSpace(f"scratch files would hold {used} bytes, over the limit of "
                          f"{self.limit_bytes}")


GIVE_BACK_BYTES = 64 << 20
"""A scratch file this large is given back to the system when it goes: the mount keeps
freed heap memory for reuse (``fuse.mount``), which would hold it for the mount's life."""


def _give_back_freed_memory() -> None:
    """Best effort (glibc only): return the heap's free memory to the system."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
