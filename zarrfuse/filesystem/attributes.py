"""What ``stat`` and ``statfs`` show: a node's attributes, the filesystem's figures, and the
ownership (uid, gid, umask) every node is shown with; and :class:`ShownAttributes`, which
works a node's out (its size and time as writers, scratch files and set times make them).

The values are handed from :class:`~zarrfuse.filesystem.fs.FileSystem` to the FUSE adapter,
which turns them into pyfuse3's types.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field

from zarrfuse.errors import NameTooLong, NotFound
from zarrfuse.filesystem.handles import OpenHandles
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import Entry, Node
from zarrfuse.filesystem.writes.commits import OpenWriters
from zarrfuse.filesystem.writes.scratch import ScratchArea
from zarrfuse.storage.base import Stat
from zarrfuse.storage.store_watch import WatchState

__all__ = ["NAME_MAX", "Attributes", "Ownership", "ShownAttributes", "StatFs", "check_name"]

NAME_MAX = 255


@dataclass(frozen=True)
class Ownership:
    """Who owns everything in the mount, and which permission bits are withheld."""

    uid: int
    gid: int
    umask: int = 0o022

    @classmethod
    def of_process(cls) -> Ownership:
        return cls(os.getuid(), os.getgid())


@dataclass(frozen=True)
class Attributes:
    """What ``stat`` shows for a node."""

    inode: int
    mode: int
    size: int
    uid: int
    gid: int
    time_ns: int
    followed: bool = False
    """Every change to it reaches the kernel as it happens (the mount's commits, and the
    store watch while it runs): the kernel may keep it as long as on a read-only mount."""

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


@dataclass
class ShownAttributes:
    """A node's attributes as the mount shows them: every stored answer from the node, the
    rest from what holds it meanwhile (a writer's size, a scratch file, a time set)."""

    namespace: Namespace
    read_only: bool
    ownership: Ownership
    following: WatchState | None
    writers: OpenWriters
    scratch: ScratchArea
    handles: OpenHandles
    times: dict[Node, tuple[int, int]] = field(default_factory=dict)
    """Times set on nodes whose store cannot keep them: the time set, and the node's own
    time it was set over (a change of that, a commit or a refreshed listing, ends it)."""

    def _time(self, node: Node, mtime_ns: int | None) -> int:
        """The node's own time (stored, or its ``zarr.json``'s), unless a time set on it
        since holds."""
        own = node.fixed_time() if mtime_ns is None else mtime_ns
        set_time = self.times.get(node)
        if set_time is None:
            return own
        if set_time[1] != own:
            del self.times[node]
            return own
        return set_time[0]

    def of(self, node: Node, size: int, mtime_ns: int | None) -> Attributes:
        array = node.in_array()
        read_only = (self.read_only or node.shown_read_only
                     or (array is not None and array.unwritable is not None))
        kind, bits = (stat.S_IFDIR, 0o777) if node.is_dir else (stat.S_IFREG, 0o666)
        bits &= ~self.ownership.umask
        if read_only:
            bits &= ~0o222
        return Attributes(
            inode=self.namespace.inode_of(node),
            mode=kind | bits,
            size=size,
            uid=self.ownership.uid,
            gid=self.ownership.gid,
            time_ns=self._time(node, mtime_ns),
            followed=self._followed(node),
        )

    def _followed(self, node: Node) -> bool:
        """Whether every change to the node reaches the kernel as it happens (the store
        watch runs; a chunk file not while a writer has it open, whose size the kernel
        holds and changes itself)."""
        if self.following is None or not self.following.live:
            return False
        return node.followed and self.writers.count(node) == 0

    async def stat(self, node: Node, inode: int | None = None) -> Stat:
        """The node's size and time as inode ``inode`` (default: the name's) shows them."""
        scratch = self.scratch.get(node)
        if scratch is not None:
            return Stat(len(scratch.data), scratch.mtime_ns)
        size = self.handles.shown_size(
            self.namespace.known_inode(node) if inode is None else inode)
        try:
            stored = await node.stat()
        except NotFound:  # a new chunk being written shows its newest writer's size
            size = self.writers.size(node) if size is None else size
            if size is None:
                raise
            return Stat(size, time.time_ns())
        return stored if size is None else Stat(size, stored.mtime_ns)

    async def entry(self, name: str, node: Node) -> Entry:
        stat = await self.stat(node)
        return Entry(name, node, stat.size, stat.mtime_ns)
