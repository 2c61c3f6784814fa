"""FUSE semantics without FUSE: :class:`FileSystem`, the whole mounted tree's behaviour.

Everything here is testable without a kernel in the loop; ``fuse.operations`` only translates
pyfuse3's calls and types to these methods. Errors are raised as ``ZarrFuseError`` with the
errno the caller should see. The read side (attributes, directories, open files, reads) is
``reading.FileSystemBase``; this module adds the requests that change the tree: truncate,
write, flush, create, unlink, rename, mkdir and rmdir. How written chunks are stored is
``commits``' job; commit errors are returned by ``close()``/``fsync()``, and ``release`` only
cleans up.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import NoReturn

import trio

from zarrfuse.errors import (
    Exists,
    ExpectedRefusal,
    InvalidArgument,
    NotAChunk,
    NotADirectory,
    NotFound,
    NotPermitted,
    ZarrFuseError,
)
from zarrfuse.filesystem.attributes import Attributes, check_name
from zarrfuse.filesystem.handles import DocumentWriter, ScratchHandle
from zarrfuse.filesystem.reading import FileSystemBase
from zarrfuse.filesystem.tree.nodes import (
    DIRECTORY_NODES,
    ArrayRoot,
    ChunkFile,
    GroupDir,
    MetadataFile,
    Node,
    ScratchFile,
)
from zarrfuse.filesystem.writes.commits import ChunkWriter
from zarrfuse.filesystem.writes.document_writes import check_identical
from zarrfuse.filesystem.writes.scratch import is_scratch_name, is_vim_probe
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = ["FileSystem"]

log = logging.getLogger(__name__)

STOP_WAIT = 5.0
"""Seconds a stopping mount (SIGTERM) serves on for files open for writing to be closed:
well within the 10 s of ``docker stop`` and the 90 s of systemd before their SIGKILL."""

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class FileSystem(FileSystemBase):
    """The mounted tree's behaviour; every stored answer comes from the namespace."""

    # --- attributes: truncate, times -----------------------------------------------------

    async def setattr(
        self, inode: int, *, size: int | None, mtime_ns: int | None, handle: int | None
    ) -> Attributes:
        """Truncate (``size``) and set times; modes and owners are accepted and ignored, as
        tools like ``rsync -a`` and ``cp -p`` set them and must not fail."""
        node = self.namespace.node(inode)
        if size is not None:
            self._check_writable(node)
            await self._truncate(node, size, handle)
        if mtime_ns is not None and self._writable(node):
            await self._set_time(node, mtime_ns)
        return await self.getattr(inode)

    def _writable(self, node: Node) -> bool:
        try:
            self._check_writable(node)
        except ZarrFuseError:
            return False
        return True

    async def _set_time(self, node: Node, mtime_ns: int) -> None:
        """Set a file's modification time: stored with a stored chunk where the store can
        keep one (local: every part's mtime); else, and for directories, metadata files and
        rendered chunks, shown until the node's own time changes (a commit, a listing that
        shows another time) or the unmount."""
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            scratch.mtime_ns, scratch.time_set = mtime_ns, True
            return
        if (
            isinstance(node, ChunkFile)
            and not self.writers.dirty(node)  # its commit will set the time anew
            and await node.array.files.set_time(node.coords, mtime_ns)
        ):
            self._times.pop(node, None)
            return
        own = (await self._stat(node)).mtime_ns
        self._times[node] = (mtime_ns, own)

    async def _truncate(self, node: Node, size: int, handle: int | None) -> None:
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            self.scratch.reserve(len(scratch.data), size)
            scratch.data.truncate(size)
            scratch.mtime_ns, scratch.time_set = time.time_ns(), False  # as any change
            return
        opened = self._files.get(handle) if handle is not None else None
        if opened is not None and await opened.truncate(size):  # the handle's own bytes
            return
        if not isinstance(node, ChunkFile):
            raise NotPermitted("only chunk files and scratch files can be truncated")
        self.committer.check_size(node, size)
        # truncate(2) on a path: takes effect at once, like on any filesystem.
        data = WriteBuffer(await self._committed_bytes(node))
        data.truncate(size)
        await self._commit(node, data, durable=False)

    # --- directories ---------------------------------------------------------------------

    async def mkdir(self, parent_inode: int, name: str) -> Attributes:
        """Grid directories always exist (EEXIST); nothing else can be made (EPERM)."""
        self._check_writable()
        check_name(name)
        parent = self.namespace.node(parent_inode)
        try:
            entry = await self._entry(parent, name)
        except NotFound:
            raise NotPermitted(f"{name!r}: only the chunk grid's directories exist") from None
        raise Exists(f"{name!r} exists" if isinstance(entry.node, DIRECTORY_NODES) else name)

    async def rmdir(self, parent_inode: int, name: str) -> None:
        self._check_writable()
        entry = await self._entry(self.namespace.node(parent_inode), name)
        if not isinstance(entry.node, DIRECTORY_NODES):
            raise NotADirectory(f"{name!r} is not a directory")
        raise NotPermitted(f"{name!r}: the chunk grid's directories cannot be removed")

    # --- writing, creating, removing, renaming -------------------------------------------

    async def write(self, handle: int, offset: int, data: bytes) -> int:
        return await self._opened(handle).write(offset, data)

    async def _commit(self, node: ChunkFile, data: WriteBuffer, *, durable: bool) -> None:
        await self.committer.commit(node, data, durable=durable)

    async def flush(self, handle: int, *, durable: bool = False) -> None:
        """Commit a written chunk, check a written document (close and fsync). Errors
        reach the caller's close()."""
        opened = self._files.get(handle)
        if opened is not None:
            await opened.flush(durable=durable)

    async def create(self, parent_inode: int, name: str, flags: int) -> tuple[int, Attributes]:
        """A new chunk file at a grid position, or a scratch file with a temp-file name."""
        parent = self.namespace.node(parent_inode)
        self._check_writable(parent)
        check_name(name)
        if not isinstance(parent, DIRECTORY_NODES):
            raise NotADirectory("not a directory")
        document = _document_named(parent, name)
        exclusive = bool(flags & os.O_EXCL)
        chunk = None
        if document is None:
            try:
                chunk = self.namespace.chunk_named(parent, name)  # NotAChunk: EPERM
            except NotAChunk:
                if exclusive and is_vim_probe(name):
                    raise ExpectedRefusal(f"{name!r}: vim's write probe, refused: vim then "
                                          "saves by overwriting the file in place") from None
                raise
        if document is not None:  # recreated after an unlink (tar x): checked at close
            self.replacements.end(document)
            handle = self._register(DocumentWriter(document, WriteBuffer()), direct=True)
        elif chunk is not None:
            handle = self._create_chunk(chunk, flags)
        elif is_scratch_name(name, exclusive=exclusive) and self.scratch.enabled:
            node = ScratchFile(parent, name)
            self.scratch.create(node, time.time_ns())
            handle = self._register(ScratchHandle(node, self.scratch), direct=True)
        elif exclusive and is_vim_probe(name):
            raise ExpectedRefusal(f"{name!r}: vim's write probe, refused: vim then saves "
                                  "by overwriting the file in place")
        else:
            raise NotPermitted(
                f"{name!r} is not a chunk of the grid here, nor a temporary file name"
            )
        attributes = await self.getattr(self.namespace.inode_of(self._files[handle].node))
        self.namespace.remember(attributes.inode)
        if chunk is not None:  # a writer's inode is its own (see page_cache)
            self._retire_if_current(chunk, attributes.inode)
        return handle, attributes

    def _create_chunk(self, chunk: ChunkFile, flags: int) -> int:
        """A writer of a new chunk file, alone on its inode (a fresh one if the name's has
        handles: see ``page_cache``)."""
        inode = self.namespace.known_inode(chunk)
        users = self.page_cache.users(inode) if inode is not None else None
        if users is not None and not users.empty():
            self.namespace.retire(chunk)
        writer = self.writers.open(chunk, WriteBuffer(), emptied=True)
        return self._admit_chunk(writer, self.namespace.inode_of(chunk), flags, writer=writer)

    async def unlink(self, parent_inode: int, name: str, pid: int | None = None) -> None:
        """Remove a chunk or scratch file. A document is kept: its unlink is accepted as the
        first step of a replace (see ``document_writes``)."""
        parent = self.namespace.node(parent_inode)
        self._check_writable(parent)
        entry = await self._entry(parent, name, pid)
        if isinstance(entry.node, MetadataFile) and pid is not None:
            self.replacements.start(entry.node, pid)
        elif isinstance(entry.node, ScratchFile):
            self.scratch.remove(entry.node)
        elif isinstance(entry.node, ChunkFile):
            await entry.node.array.files.delete(entry.node.coords)
            self.namespace.retire(entry.node)  # its readers keep the old inode
            self._times.pop(entry.node, None)
        elif isinstance(entry.node, DIRECTORY_NODES):
            raise NotPermitted(f"{name!r} is a directory")
        else:
            raise NotPermitted(f"{name!r} is shown by the mount and cannot be removed")

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
            raise InvalidArgument("RENAME_EXCHANGE is not supported")
        entry = await self._entry(source_dir, old_name)
        if not isinstance(entry.node, ScratchFile):
            # Tools that rename the original to a backup name (mogrify, vim, emacs) copy it
            # instead when this is refused.
            raise ExpectedRefusal(f"{old_name!r}: only temporary files can be renamed")
        if flags & RENAME_NOREPLACE:
            try:
                await self._entry(target_dir, new_name)
            except NotFound:
                pass
            else:
                raise Exists(f"{new_name!r} exists")
        inode = self.namespace.inode_of(entry.node)
        document = _document_named(target_dir, new_name)
        if document is not None:  # rsync's temp file onto a document: the same bytes only
            scratch = self._scratch(entry.node)
            check_identical(document, scratch.data.read(0, len(scratch.data)))
            self.scratch.remove(entry.node)
            self.replacements.end(document)
            self.namespace.rebind(inode, document)
            if scratch.time_set:
                await self._set_time(document, scratch.mtime_ns)
            return
        chunk = self.namespace.chunk_named(target_dir, new_name)
        if chunk is not None:
            scratch = self._scratch(entry.node)
            await self.committer.commit(chunk, scratch.data, durable=False, renaming=True)
            self.scratch.remove(entry.node)
            self.namespace.rebind(inode, chunk)
            if scratch.time_set:  # rsync set the source's time on its temp file: keep it
                await self._set_time(chunk, scratch.mtime_ns)
            return
        # The bytes are a scratch file's already: a template name needs no O_EXCL here.
        if not is_scratch_name(new_name, exclusive=True) or not isinstance(
            target_dir, DIRECTORY_NODES
        ):
            raise NotPermitted(f"{new_name!r} is not a chunk of the grid nor a temp file name")
        target = ScratchFile(target_dir, new_name)
        self.scratch.remove(target)
        self.scratch.move(entry.node, target)
        self.namespace.rebind(inode, target)

    async def refuse_link(self, parent_inode: int, name: str, what: str) -> NoReturn:
        """Symlinks, hard links and special files have no place in a chunk grid: EPERM (after
        the checks every new name gets). Emacs's lock symlink ``.#name`` is refused so too;
        it then makes the lock a scratch file."""
        self._check_writable(self.namespace.node(parent_inode))
        check_name(name)
        raise ExpectedRefusal(f"{name!r}: {what} cannot be made in the mount")

    async def stop_once_closed(self, stop: Callable[[], None]) -> None:
        """A stopping mount serves on until no chunk file is open for writing (at most
        STOP_WAIT seconds), then calls ``stop``: a writer that closes meanwhile is answered
        as any time (its chunk stored). A stop that stored what a writer still held would
        store a chunk whose close() the kernel then fails (the mount is gone)."""
        if count := sum(map(self.writers.count, self.writers.chunks())):
            log.info("waiting up to %g s for %d chunk file(s) open for writing to be closed "
                     "(a second SIGTERM or SIGINT stops at once)", STOP_WAIT, count)
            with trio.move_on_after(STOP_WAIT):
                await self.writers.none_open()
        stop()

    def drop_open_writers(self) -> None:
        """Stopped with chunk files open for writing: what they hold is not stored (their
        close() fails), one line for each written one."""
        for opened in self._files.values():
            if isinstance(opened, ChunkWriter) and opened.dirty:
                log.warning("chunk %s of %s was still open for writing when the mount "
                            "stopped: its writes are not stored (its close() fails)",
                            opened.node.coords, opened.node.array.path or "/")

    def log_scratch_left(self) -> None:
        """At unmount: name every scratch file still held, which is dropped unstored (a
        tool that died before renaming its temp file, a backup an editor kept)."""
        for key in self.scratch.names():
            scratch = self.scratch.get(key)
            if isinstance(key, ScratchFile) and scratch is not None:
                where = self.namespace.directory_path(key.directory)
                log.warning(
                    "scratch file %s (%d bytes) was never renamed onto a chunk and is "
                    "dropped at unmount, unstored",
                    "/".join(p for p in (where, key.name) if p), len(scratch.data),
                )


def _document_named(directory: Node, name: str) -> MetadataFile | None:
    """The metadata document ``name`` that ``directory`` shows, if it shows one."""
    if isinstance(directory, GroupDir) and name in directory.group.documents:
        return MetadataFile(directory.group, name)
    if isinstance(directory, ArrayRoot) and name in directory.array.documents:
        return MetadataFile(directory.array, name)
    return None
