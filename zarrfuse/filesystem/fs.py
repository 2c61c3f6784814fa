"""FUSE semantics without FUSE: :class:`FileSystem`, the whole mounted tree's behaviour,
built from collaborators handed to each other (docs/contributing.md, 'Layout'). Errors are
``ZarrFuseError`` with the errno the caller should see; commit errors are returned by
``close()``/``fsync()``, ``release`` only cleans up.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from zarrfuse import errors
from zarrfuse.filesystem.attributes import Attributes, Ownership, StatFs, check_name
from zarrfuse.filesystem.chunk_opening import ChunkOpening, writing
from zarrfuse.filesystem.handles import (
    DocumentWriter,
    ImageReader,
    MetadataReader,
    OpenHandles,
    ScratchHandle,
)
from zarrfuse.filesystem.listing import Listings
from zarrfuse.filesystem.page_cache import PageCacheUsers
from zarrfuse.filesystem.store_changes import apply_store_changes
from zarrfuse.filesystem.tree import nodes
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ChunkFile, Entry, Node, ScratchFile
from zarrfuse.filesystem.writes.commits import ChunkWriter, Committer, OpenWriters, WriteOptions
from zarrfuse.filesystem.writes.document_writes import Replacements, check_identical
from zarrfuse.filesystem.writes.scratch import ScratchArea, is_scratch_name, is_vim_probe
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer
from zarrfuse.storage.base import Stat
from zarrfuse.storage.store_watch import WatchState

__all__ = ["FileSystem"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096

STOP_WAIT = 5.0
"""Seconds a stopping mount (SIGTERM) serves on for files open for writing to be closed:
well within the 10 s of ``docker stop`` and the 90 s of systemd before their SIGKILL."""

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class FileSystem:
    """The mounted tree's behaviour; every stored answer comes from the nodes."""

    def __init__(
        self,
        namespace: Namespace,
        *,
        read_only: bool = True,
        write_options: WriteOptions | None = None,
        ownership: Ownership | None = None,
        following: WatchState | None = None,
    ) -> None:
        """``following``: the store watch's state, where one runs."""
        self.namespace = namespace
        self.following = following
        if following is not None:
            following.when_ended(self._unfollowed)
        self.read_only = read_only
        options = write_options or WriteOptions()
        self.page_cache = PageCacheUsers()
        self.handles = OpenHandles(self.page_cache, read_only=read_only)
        self.committer = Committer(namespace, options,
                                   unused=lambda inode: self.page_cache.users(inode) is None,
                                   committed=lambda node: self.times.pop(node, None))
        self.writers = OpenWriters(self.committer)
        self.scratch = ScratchArea(0 if read_only else options.scratch_bytes)
        self.ownership = ownership or Ownership(os.getuid(), os.getgid())
        self.times: dict[Node, tuple[int, int]] = {}
        """Times set on nodes whose store cannot keep them: the time set, and the node's own
        time it was set over (a change of that, a commit or a refreshed listing, ends it)."""
        self.listings = Listings(namespace, self.writers, self.scratch, self.handles,
                                 self._shown_entry, self.attributes)
        self.opening = ChunkOpening(namespace, self.writers, self.page_cache, self.handles)
        self.replacements = Replacements()

    async def apply_store_changes(self, keys: set[str]) -> None:
        """Store keys another program changed: the files that show them are read anew."""
        await apply_store_changes(self.namespace, self.committer, keys)

    @property
    def drops(self) -> int:
        """Nodes whose kernel caches were dropped so far (``Committer.drop_cache``)."""
        return self.committer.drops

    async def _unfollowed(self) -> None:
        """The store watch stopped: the kernel kept chunk files for long, trusting it to say
        what changed; now each it holds is read anew, as after a change."""
        for node in self.namespace.known_nodes(ChunkFile):
            await self.committer.drop_cache(node)

    def set_invalidators(
        self,
        inode: Callable[[int, bool], Awaitable[None]],
        entry: Callable[[int, str], Awaitable[None]],
    ) -> None:
        """How to drop the kernel's cache of an inode (its attributes only, or its pages
        too), or of a name (from the FUSE adapter)."""
        self.committer.invalidate, self.committer.invalidate_entry = inode, entry

    # --- names and attributes ------------------------------------------------------------

    async def _entry(self, parent: Node, name: str, pid: int | None = None) -> Entry:
        """The entry ``name`` in ``parent``, including scratch files and unstored new chunks;
        as process ``pid`` sees it (a document it unlinked is absent for it a moment)."""
        check_name(name)
        if not parent.is_dir:
            raise errors.NotADirectory("not a directory")
        scratch_node = ScratchFile(parent, name)
        if self.scratch.get(scratch_node) is not None:
            return await self._shown_entry(name, scratch_node)
        try:
            entry = await self.namespace.lookup(parent, name)
        except errors.NotShownNow:
            raise
        except errors.NotFound:
            chunk = self._chunk_named(parent, name)
            if chunk is not None and self.writers.size(chunk) is not None:
                return await self._shown_entry(name, chunk)
            raise
        document = parent.document_named(name)
        if document is not None and self.replacements.hides(document, pid):
            raise errors.NotShownNow(f"{name!r} is being replaced by process {pid}")
        return entry

    @staticmethod
    def _chunk_named(parent: Node, name: str) -> ChunkFile | None:
        try:
            return parent.chunk_named(name)
        except errors.NotAChunk:
            return None

    def attributes(self, node: Node, size: int, mtime_ns: int | None) -> Attributes:
        """What stat shows of ``node``: every stored answer from the node, the rest from
        what holds it meanwhile (a writer's size, a scratch file, a time set)."""
        read_only = node.shown_read_only or self._unwritable(node) is not None
        owner = self.ownership
        return Attributes(self.namespace.inode_of(node), _mode(node.is_dir, read_only, owner.umask),
                          size, owner.uid, owner.gid, self._time(node, mtime_ns),
                          self._followed(node), node.renamed_by_changes)

    def _time(self, node: Node, mtime_ns: int | None) -> int:
        """The node's own time (stored, or its metadata's), unless a time set since holds."""
        own = node.fixed_time() if mtime_ns is None else mtime_ns
        set_time = self.times.get(node) if self.times else None  # most often none is set
        if set_time is None:
            return own
        if set_time[1] != own:
            del self.times[node]
            return own
        return set_time[0]

    def _followed(self, node: Node) -> bool:
        """Whether every change to the node reaches the kernel as it happens (the store
        watch runs; a chunk file not while a writer has it open, whose size the kernel
        holds and changes itself)."""
        if self.following is None or not self.following.live:
            return False
        return node.followed and self.writers.count(node) == 0

    async def _stat(self, node: Node, inode: int | None = None) -> Stat:
        """The node's size and time as inode ``inode`` (default: the name's) shows them."""
        scratch = self.scratch.get(node)
        if scratch is not None:
            return Stat(len(scratch.data), scratch.mtime_ns)
        size = self.handles.shown_size(
            self.namespace.known_inode(node) if inode is None else inode)
        try:
            stored = await node.stat()
        except errors.NotFound:  # a new chunk being written shows its newest writer's size
            size = self.writers.size(node) if size is None else size
            if size is None:
                raise
            return Stat(size, time.time_ns())
        return stored if size is None else Stat(size, stored.mtime_ns)

    async def _shown_entry(self, name: str, node: Node) -> Entry:
        now = await self._stat(node)
        return Entry(name, node, now.size, now.mtime_ns)

    async def lookup(self, parent_inode: int, name: str, pid: int | None = None) -> Attributes:
        entry = await self._entry(self.namespace.node(parent_inode), name, pid)
        attributes = self.attributes(entry.node, entry.size, entry.mtime_ns)
        # An opener sent to a fresh inode (only chunk files are) gets its own inode.
        claimed = self.page_cache.claim(entry.node, pid, lambda: self.opening.fresh(entry.node),
                                        lambda inode: self.namespace.known(inode) is not None)
        if claimed is not None:
            attributes = attributes._replace(inode=claimed)
        self.namespace.remember(attributes.inode)
        return attributes

    async def getattr(self, inode: int) -> Attributes:
        node = self.namespace.node(inode)
        try:
            now = await self._stat(node, inode)
        except errors.NotFound as e:
            raise _stale(node, e) from e
        return self.attributes(node, now.size, now.mtime_ns)

    def forget(self, inode: int, count: int) -> None:
        self.namespace.forget(inode, count)
        if self.namespace.known(inode) is None:
            self.page_cache.forget(inode)

    def remember(self, inode: int) -> None:
        """A readdir entry was accepted by the kernel: it now counts as looked up."""
        self.namespace.remember(inode)

    def statfs(self) -> StatFs:
        return StatFs(block_size=BLOCK_SIZE, blocks=0, files=self.namespace.inode_count)

    async def setattr(
        self, inode: int, *, size: int | None, mtime_ns: int | None, handle: int | None
    ) -> Attributes:
        """Truncate (``size``) and set times; modes and owners are accepted and ignored, as
        tools like ``rsync -a`` and ``cp -p`` set them and must not fail."""
        node = self.namespace.node(inode)
        if size is not None:
            self._check_writable(node)
            opened = self.handles.get(handle)
            if opened is None or not await opened.truncate(size):  # else the handle's bytes
                await node.truncate(self, size)
        if mtime_ns is not None and self._unwritable(node) is None:
            await self._set_time(node, mtime_ns)
        return await self.getattr(inode)

    async def _set_time(self, node: Node, mtime_ns: int) -> None:
        """Set a file's modification time: stored with a stored chunk where the store can
        keep one; else shown until the node's own time changes or the unmount."""
        scratch = self.scratch.get(node)
        if scratch is not None:
            scratch.mtime_ns, scratch.time_set = mtime_ns, True
            return
        # A dirty chunk's commit will set the time anew.
        if not self.writers.dirty(node) and await node.set_stored_time(mtime_ns):
            self.times.pop(node, None)
            return
        own = (await self._stat(node)).mtime_ns
        self.times[node] = (mtime_ns, own)

    # --- opening, reading, writing, releasing --------------------------------------------

    def _unwritable(self, node: Node | None = None) -> str | None:
        """Why ``node`` cannot be written: a read-only mount, an array that cannot be."""
        array = None if node is None else node.in_array()
        if self.read_only:
            return "the mount is read-only"
        if array is not None and array.unwritable is not None:
            return f"array {array.path or '/'} cannot be written: {array.unwritable}"
        return None

    def _check_writable(self, node: Node | None = None) -> None:
        """EROFS: refused when a file is opened for writing, never at close()."""
        why = self._unwritable(node)
        if why is not None:
            raise errors.ReadOnlyError(why)

    async def open(self, inode: int, flags: int, pid: int | None = None) -> int:
        """A handle of the file; readers read the version they opened until they close.
        ``pid``: the opener (see ``page_cache``: an open may be sent to a fresh inode)."""
        node = self.namespace.node(inode)
        try:
            if writing(flags):
                self._check_writable(node)
            return await node.open(self, inode, flags, pid)
        except errors.NotFound as e:
            raise _stale(node, e) from e

    # FileRequests: the part of a request on a file's bytes that differs by kind.

    async def open_chunk(self, node: ChunkFile, inode: int, flags: int, pid: int | None
                         ) -> int:
        return await self.opening.open(inode, node, flags, pid)

    def open_document(self, node: nodes.MetadataFile, flags: int) -> int:
        if writing(flags):  # checked at close: only the same bytes are accepted
            data = b"" if flags & os.O_TRUNC else node.data
            return self.handles.register(DocumentWriter(node, WriteBuffer(data)), direct=True)
        return self.handles.register(MetadataReader(node), direct=not self.read_only)

    def open_image(self, node: nodes.ImageFile, flags: int) -> int:
        if writing(flags):
            raise errors.ReadOnlyError(f"{node.image.name}: whole-image files are read-only")
        # Whole images keep the page cache to be mapped (READ_AHEAD_GAP spares the tiles).
        return self.handles.register(ImageReader(node), direct=False)

    def open_scratch(self, node: ScratchFile, flags: int) -> int:
        scratch = self.scratch.held(node)
        if flags & os.O_TRUNC:
            scratch.data.truncate(0)
        return self.handles.register(ScratchHandle(node, self.scratch), direct=True)

    async def truncate_chunk(self, node: ChunkFile, size: int) -> None:
        """truncate(2) on a path: takes effect at once, like on any filesystem."""
        self.committer.check_size(node, size)
        data = WriteBuffer(await node.array.files.committed_bytes(node.coords))
        data.truncate(size)
        await self.committer.commit(node, data, durable=False)

    async def truncate_scratch(self, node: ScratchFile, size: int) -> None:
        scratch = self.scratch.held(node)
        self.scratch.reserve(len(scratch.data), size)
        scratch.data.truncate(size)
        scratch.mtime_ns, scratch.time_set = time.time_ns(), False  # as any change

    async def read_into(self, handle: int, offset: int, out: memoryview) -> int:
        """Fill ``out`` with the file's bytes from ``offset``; returns how many there were."""
        return await self.handles.opened(handle).read_into(offset, out)

    async def write(self, handle: int, offset: int, data: bytes) -> int:
        return await self.handles.opened(handle).write(offset, data)

    async def flush(self, handle: int, *, durable: bool = False) -> None:
        """Commit a written chunk, check a written document (close and fsync). Errors
        reach the caller's close()."""
        opened = self.handles.get(handle)
        if opened is not None:
            await opened.flush(durable=durable)

    async def release(self, handle: int) -> None:
        await self.handles.release(handle)

    # --- changing the tree ---------------------------------------------------------------

    async def mkdir(self, parent_inode: int, name: str) -> Attributes:
        """Grid directories always exist (EEXIST); nothing else can be made (EPERM)."""
        self._check_writable()
        check_name(name)
        parent = self.namespace.node(parent_inode)
        try:
            entry = await self._entry(parent, name)
        except errors.NotFound:
            raise errors.NotPermitted(
                f"{name!r}: only the chunk grid's directories exist") from None
        raise errors.Exists(f"{name!r} exists" if entry.node.is_dir else name)

    async def rmdir(self, parent_inode: int, name: str) -> None:
        self._check_writable()
        entry = await self._entry(self.namespace.node(parent_inode), name)
        if not entry.node.is_dir:
            raise errors.NotADirectory(f"{name!r} is not a directory")
        raise errors.NotPermitted(f"{name!r}: the chunk grid's directories cannot be removed")

    async def create(self, parent_inode: int, name: str, flags: int) -> tuple[int, Attributes]:
        """A new chunk file at a grid position, or a scratch file with a temp-file name."""
        parent = self.namespace.node(parent_inode)
        self._check_writable(parent)
        check_name(name)
        if not parent.is_dir:
            raise errors.NotADirectory("not a directory")
        document = parent.document_named(name)
        exclusive = bool(flags & os.O_EXCL)
        if (exclusive and is_vim_probe(name) and document is None
                and self._chunk_named(parent, name) is None):
            raise errors.ExpectedRefusal(f"{name!r}: vim's write probe, refused: vim then "
                                         "saves by overwriting the file in place")
        chunk = None if document is not None else parent.chunk_named(name)  # NotAChunk: EPERM
        if document is not None:  # recreated after an unlink (tar x): checked at close
            self.replacements.end(document)
            handle = self.handles.register(DocumentWriter(document, WriteBuffer()), direct=True)
        elif chunk is not None:
            handle = self.opening.create(chunk, flags)
        elif is_scratch_name(name, exclusive=exclusive) and self.scratch.enabled:
            node = ScratchFile(parent, name)
            self.scratch.create(node, time.time_ns())
            handle = self.handles.register(ScratchHandle(node, self.scratch), direct=True)
        else:
            raise errors.NotPermitted(
                f"{name!r} is not a chunk of the grid here, nor a temporary file name")
        attributes = await self.getattr(self.namespace.inode_of(self.handles.opened(handle).node))
        self.namespace.remember(attributes.inode)
        if chunk is not None:  # a writer's inode is its own (see page_cache)
            self.opening.retire_if_current(chunk, attributes.inode)
        return handle, attributes

    async def unlink(self, parent_inode: int, name: str, pid: int | None = None) -> None:
        """Remove a chunk or scratch file. A document is kept: its unlink is accepted as the
        first step of a replace (see ``document_writes``)."""
        parent = self.namespace.node(parent_inode)
        self._check_writable(parent)
        node = (await self._entry(parent, name, pid)).node
        document, scratch = parent.document_named(name), ScratchFile(parent, name)
        if node == scratch:
            self.scratch.remove(scratch)
        elif document is not None and node == document and pid is not None:
            self.replacements.start(document, pid)
        else:
            await node.delete(name)
            self.namespace.retire(node)  # its readers keep the old inode
            self.times.pop(node, None)

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        """Scratch files may be renamed; onto a chunk name that commits them as the chunk."""
        source_dir = self.namespace.node(old_parent)
        target_dir = self.namespace.node(new_parent)
        self._check_writable(source_dir)
        self._check_writable(target_dir)
        check_name(new_name)
        if flags & RENAME_EXCHANGE:
            raise errors.InvalidArgument("RENAME_EXCHANGE is not supported")
        source = ScratchFile(source_dir, old_name)
        if (await self._entry(source_dir, old_name)).node != source:
            # Tools that rename the original to a backup name (mogrify, vim, emacs) copy it
            # instead when this is refused.
            raise errors.ExpectedRefusal(f"{old_name!r}: only temporary files can be renamed")
        if flags & RENAME_NOREPLACE:
            try:
                await self._entry(target_dir, new_name)
            except errors.NotFound:
                pass
            else:
                raise errors.Exists(f"{new_name!r} exists")
        inode = self.namespace.inode_of(source)
        document = target_dir.document_named(new_name)
        chunk = None if document is not None else target_dir.chunk_named(new_name)
        stored = chunk or document
        if stored is not None:
            scratch = self.scratch.held(source)
            if chunk is not None:
                await self.committer.commit(chunk, scratch.data, durable=False, renaming=True)
            elif document is not None:  # rsync's temp file onto a document: the same bytes only
                check_identical(document, scratch.data.read(0, len(scratch.data)))
                self.replacements.end(document)
            self.scratch.remove(source)
            self.namespace.rebind(inode, stored)
            if scratch.time_set:  # rsync set the source's time on its temp file: keep it
                await self._set_time(stored, scratch.mtime_ns)
            return
        # The bytes are a scratch file's already: a template name needs no O_EXCL here.
        if not is_scratch_name(new_name, exclusive=True) or not target_dir.is_dir:
            raise errors.NotPermitted(
                f"{new_name!r} is not a chunk of the grid nor a temp file name")
        target = ScratchFile(target_dir, new_name)
        self.scratch.remove(target)
        self.scratch.move(source, target)
        self.namespace.rebind(inode, target)

    async def refuse_link(self, parent_inode: int, name: str, what: str) -> NoReturn:
        """Symlinks, hard links and special files have no place in a chunk grid: EPERM (after
        the checks every new name gets). Emacs's lock symlink ``.#name`` is refused so too;
        it then makes the lock a scratch file."""
        self._check_writable(self.namespace.node(parent_inode))
        check_name(name)
        raise errors.ExpectedRefusal(f"{name!r}: {what} cannot be made in the mount")

    # --- stopping ------------------------------------------------------------------------

    async def stop_once_closed(self, stop: Callable[[], None]) -> None:
        """A stopping mount serves on until no chunk file is open for writing (at most
        STOP_WAIT seconds), then calls ``stop``: a writer's close() after the mount is gone
        would fail although its chunk was stored."""
        if count := sum(map(self.writers.count, self.writers.chunks())):
            log.info("waiting up to %g s for %d chunk file(s) open for writing to be closed "
                     "(a second SIGTERM or SIGINT stops at once)", STOP_WAIT, count)
            with trio.move_on_after(STOP_WAIT):
                await self.writers.none_open()
        stop()

    def drop_open_writers(self) -> None:
        """Stopped with chunk files open for writing: what they hold is not stored (their
        close() fails), one line for each written one."""
        for opened in self.handles.all():
            if isinstance(opened, ChunkWriter) and opened.dirty:
                log.warning("chunk %s of %s was still open for writing when the mount "
                            "stopped: its writes are not stored (its close() fails)",
                            opened.node.coords, opened.node.array.path or "/")

    def log_scratch_left(self) -> None:
        """At unmount: name every scratch file still held, which is dropped unstored (a
        tool that died before renaming its temp file, a backup an editor kept)."""
        for key in self.scratch.names():
            scratch = self.scratch.get(key)
            if scratch is not None:
                log.warning(
                    "scratch file %s (%d bytes) was never renamed onto a chunk and is "
                    "dropped at unmount, unstored",
                    "/".join(p for p in (key.directory.path(), key.name) if p),
                    len(scratch.data),
                )


@functools.cache
def _mode(is_dir: bool, read_only: bool, umask: int) -> int:
    """A node's mode: a directory or a file, all permissions but the umask's and, where it
    cannot be written, the write bits (worked out once: every file listed asks)."""
    kind, bits = (stat.S_IFDIR, 0o777) if is_dir else (stat.S_IFREG, 0o666)
    return kind | bits & ~umask & (~0o222 if read_only else ~0)


def _stale(node: Node, gone: errors.NotFound) -> errors.ZarrFuseError:
    """A file the kernel still holds an inode of, gone since it looked the name up (another
    writer removed it, a refused new file was released): ESTALE makes the kernel look the
    name up again, and then say ENOENT or create it (``open(O_CREAT)``)."""
    if node.comes_and_goes:
        return errors.Stale(f"{gone}: the name is looked up again")
    return gone
