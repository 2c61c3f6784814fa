"""Who shares the kernel's page cache of a chunk file: an inode holds either readers of one
version or one writer; an open that would break it gets ``ESTALE`` and the kernel's one retry
finds a fresh inode, the name reserved for it meanwhile. Why: docs/writing.md, 'The page
cache and memory mapping'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import trio

from zarrfuse.errors import Stale
from zarrfuse.request_deadline import waited

__all__ = ["RESERVE_WAIT", "RETRY_WINDOW", "InodeUsers", "PageCacheUsers"]

log = logging.getLogger(__name__)

RESERVE_WAIT = 0.5
"""Seconds other openers of a name wait for the opener it sent to a fresh inode."""
RETRY_WINDOW = 2.0
"""Seconds within which an opener's next open of the same name is the kernel's retry."""


@dataclass
class InodeUsers:
    """The handles open on one inode: readers of one version, or one writer."""

    readers: set[int] = field(default_factory=set)
    writer: int | None = None
    direct: set[int] = field(default_factory=set)
    """Handles admitted beside others after the kernel's one retry: direct I/O."""
    version: Hashable | None = None
    """What the readers' pages hold (kept after they close: the kernel keeps the pages)."""
    size: int | None = None
    """The readers' version's size: the size this inode shows while they read."""

    def empty(self) -> bool:
        return not self.readers and self.writer is None and not self.direct


class PageCacheUsers:
    """The handles of each inode, and the decision for each new one (see the module)."""

    def __init__(self) -> None:
        self._inodes: dict[int, InodeUsers] = {}
        self._handles: dict[int, int] = {}
        """Handle -> the inode it is open on (chunk handles only)."""
        self._direct: set[int] = set()
        self._keep: set[int] = set()
        self._sent_away: dict[tuple[Hashable, int], float] = {}
        """(name, pid) -> when that opener was sent to a fresh inode."""
        self._claims: dict[tuple[Hashable, int], int] = {}
        """(name, pid) -> the fresh inode that opener's repeated lookup was given."""
        self._reserved: dict[Hashable, dict[int, tuple[float, trio.Event]]] = {}
        """name -> the openers sent away from it: pid -> (until when, set when it came)."""

    # --- before opening ------------------------------------------------------------------

    async def arrive(self, name: Hashable, pid: int | None) -> bool:
        """First in every open of ``name``: waits while the name is reserved for other
        openers; whether this open is the kernel's retry of one sent away."""
        if not (self._reserved or self._sent_away or self._claims):
            return False  # nobody was sent away lately: every open's case
        reserved = self._reserved.get(name)
        if reserved is not None:
            now = time.monotonic()
            for owner, (until, came) in list(reserved.items()):
                if now >= until:
                    came.set()
                    del reserved[owner]
            if not reserved:
                del self._reserved[name]
            elif pid not in reserved:
                for until, came in list(reserved.values()):
                    with trio.move_on_after(max(0.0, until - time.monotonic())):
                        await waited(came.wait())
        if pid is None:
            return False
        sent = self._sent_away.pop((name, pid), None)
        if sent is not None and time.monotonic() - sent < RETRY_WINDOW:
            return True
        self._claims.pop((name, pid), None)
        return False

    def claim(
        self, name: Hashable, pid: int | None, fresh: Callable[[], int],
        known: Callable[[int], bool],
    ) -> int | None:
        """The inode the lookup of ``name`` by ``pid`` must answer: for an opener sent away
        (the kernel's repeated lookup), an inode of its own (``fresh()``); the same one while
        the kernel still ``known``s it (it looks a changed name up twice, and forgets the
        first answer); None for every other lookup."""
        if pid is None or (name, pid) not in self._sent_away:
            return None
        key = (name, pid)
        claimed = self._claims.get(key)
        if claimed is None or not known(claimed):
            claimed = self._claims[key] = fresh()
        return claimed

    def claimed(self, name: Hashable, pid: int | None) -> int | None:
        if pid is None or not self._claims:
            return None
        return self._claims.get((name, pid))

    def settled(self, name: Hashable, pid: int | None) -> None:
        """The open of ``name`` by ``pid`` ended: openers waiting for it go on."""
        if pid is not None:
            self._claims.pop((name, pid), None)
        reserved = self._reserved.get(name)
        if reserved is None or pid not in reserved:
            return
        reserved.pop(pid)[1].set()
        if not reserved:
            del self._reserved[name]

    def send_away(self, name: Hashable, pid: int | None, why: str) -> Stale:
        """The error that sends an opener to a fresh inode; reserves the name for it."""
        now = time.monotonic()
        if pid is not None:
            self._sent_away[(name, pid)] = now
            for key, when in list(self._sent_away.items()):
                if now - when >= RETRY_WINDOW:
                    del self._sent_away[key]
                    self._claims.pop(key, None)
            self._reserved.setdefault(name, {})[pid] = (now + RESERVE_WAIT, trio.Event())
        return Stale(f"{why}: opening it on a fresh inode")

    # --- opening -------------------------------------------------------------------------

    def conflict(
        self, inode: int, *, writer: bool, current: bool, version: Hashable | None = None,
    ) -> str | None:
        """Why a new handle of ``inode`` may not join it (None: it may)."""
        users = self._inodes.get(inode)
        if not current and not (writer and users is None):  # a writer there is alone
            return "the name has a newer inode"
        if users is None:
            return None
        if users.writer is not None or users.direct:
            return "a writer has it open" if users.writer is not None else "it is shared"
        if writer and users.readers:
            return "readers have it open"
        if not writer and version is not None and users.readers and users.version != version:
            return "its readers read another version"
        return None

    def check(
        self, inode: int, name: Hashable, pid: int | None, *, writer: bool, current: bool,
        retry: bool, retire: Callable[[], None], version: Hashable | None = None,
        label: Callable[[], str] = str,
    ) -> bool:
        """Whether ``inode`` is crowded for this open of ``name`` (allowed only for the
        kernel's retry, with direct I/O); otherwise ``retire`` the name's inode (if this is
        it) and raise the error that sends the opener away."""
        why = self.conflict(inode, writer=writer, current=current, version=version)
        if why is None:
            return False
        if retry:
            log.debug("%s (inode %d, pid %s): %s, opened beside it with direct I/O", label(),
                      inode, pid, why)
            return True
        if current:
            retire()
        raise self.send_away(name, pid, f"{label()} (inode {inode}, pid {pid}): {why}")

    def admit(
        self, inode: int, handle: int, *, writer: bool, read_write: bool,
        version: Hashable | None = None, size: int | None = None, retry: bool = False,
    ) -> None:
        """Record ``handle`` on ``inode`` (checked first, or a retry let in beside others:
        then direct I/O)."""
        self._handles[handle] = inode
        crowded = self.conflict(inode, writer=writer, current=True, version=version) is not None
        users = self._inodes.setdefault(inode, InodeUsers())
        if crowded:
            if not retry:
                raise AssertionError("admit() of a handle conflict() refused")
            users.direct.add(handle)
            self._direct.add(handle)
        elif writer:
            users.writer = handle
            if not read_write:
                self._direct.add(handle)
        else:
            keep = users.version == version and version is not None
            users.readers.add(handle)
            users.version, users.size = version, size
            if keep:
                self._keep.add(handle)

    def admit_outside(self, handle: int, *, direct: bool) -> None:
        """A handle outside the rule: scratch files and documents always with direct I/O;
        a read-only mount's documents and whole images with pages the kernel may keep
        (dropped by what changes them, not by a version)."""
        (self._direct if direct else self._keep).add(handle)

    # --- what the FUSE layer asks ----------------------------------------------------------

    def direct(self, handle: int) -> bool:
        return handle in self._direct

    def keep_cache(self, handle: int) -> bool:
        """Whether the kernel may keep the inode's pages (they hold this handle's version)."""
        return handle in self._keep

    def owns_pages(self, handle: int) -> bool:
        """Whether ``handle`` is a writer whose buffer the inode's pages show."""
        inode = self._handles.get(handle)
        users = self._inodes.get(inode) if inode is not None else None
        return users is not None and users.writer == handle and handle not in self._direct

    def users(self, inode: int) -> InodeUsers | None:
        return self._inodes.get(inode)

    # --- closing -------------------------------------------------------------------------

    def release(self, handle: int) -> None:
        self._direct.discard(handle)
        self._keep.discard(handle)
        inode = self._handles.pop(handle, None)
        users = self._inodes.get(inode) if inode is not None else None
        if inode is None or users is None:
            return
        users.readers.discard(handle)
        users.direct.discard(handle)
        if users.writer == handle:
            users.writer = None
            users.version = users.size = None  # its pages were its buffer
        if users.empty() and users.version is None:
            del self._inodes[inode]

    def forget(self, inode: int) -> None:
        """The kernel forgot ``inode``: its pages are gone with it."""
        users = self._inodes.get(inode)
        if users is not None and users.empty():
            del self._inodes[inode]
