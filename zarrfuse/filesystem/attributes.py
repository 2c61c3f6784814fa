"""What ``stat`` and ``statfs`` show: a node's attributes, the filesystem's figures, and the
ownership every node is shown with; the FUSE adapter turns them into pyfuse3's types."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import NamedTuple

from zarrfuse.errors import NameTooLong

__all__ = ["NAME_MAX", "Attributes", "Ownership", "StatFs", "check_name"]

NAME_MAX = 255


@dataclass(frozen=True)
class Ownership:
    """Who owns everything in the mount, and which permission bits are withheld."""

    uid: int
    gid: int
    umask: int = 0o022


class Attributes(NamedTuple):
    """What ``stat`` shows for a node (a tuple: one is built per file listed)."""

    inode: int
    mode: int
    size: int
    uid: int
    gid: int
    time_ns: int
    followed: bool = False
    """Every change to it reaches the kernel as it happens (the mount's commits, and the
    store watch while it runs): the kernel may keep it as long as on a read-only mount."""
    renamed_by_changes: bool = False
    """The kernel keeps no entry of its name (``Node.renamed_by_changes``)."""

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


@dataclass(frozen=True)
class StatFs:
    block_size: int
    blocks: int
    files: int
    name_max: int = NAME_MAX


def check_name(name: str) -> None:
    """ENAMETOOLONG for a name over NAME_MAX bytes, as statvfs announces (the kernel passes
    FUSE names up to 1024 bytes)."""
    if len(os.fsencode(name)) > NAME_MAX:
        raise NameTooLong(f"{name[:40]!r}...: names are at most {NAME_MAX} bytes")
