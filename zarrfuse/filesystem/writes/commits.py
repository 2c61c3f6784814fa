"""Storing what writers wrote: open writers per chunk, size limits, write checks, commits.
A writer's buffer is committed by ``flush`` (close) and ``fsync``; readers opened before
keep their version."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from zarrfuse.errors import FileTooBig, ZarrFuseError
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ChunkFile, Node
from zarrfuse.filesystem.writes.level_updates import LevelUpdates
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer
from zarrfuse.request_deadline import waited

__all__ = ["ChunkWriter", "Committer", "OpenWriters", "WriteOptions"]

log = logging.getLogger(__name__)

# A chunk file may be this much larger than the decoded chunk before EFBIG: codecs can
# expand incompressible data a little, and sharding adds an index.
SIZE_LIMIT_SLACK = 1 << 20


@dataclass(frozen=True)
class WriteOptions:
    """How a writable mount treats writes."""

    verify: bool = True
    """Check every chunk before storing it (verify.py); refuse what zarr could not decode."""
    max_chunk_bytes: int | None = None
    """Largest chunk file accepted (EFBIG beyond); None: twice the decoded chunk + slack."""
    scratch_bytes: int = 512 << 20
    """Total bytes of scratch (temp) files held in memory; 0 refuses scratch files."""


@dataclass(eq=False)
class ChunkWriter:
    """A chunk opened for writing: a private buffer committed on flush/fsync. Its state
    (dirty, committing, refused, emptied) decides what each request does."""

    node: ChunkFile
    data: WriteBuffer
    writers: OpenWriters = field(repr=False)
    dirty: bool = False
    serial: int = 0
    """Order of the last change among all writers: the newest writer's size is shown."""
    committing: trio.Event | None = None
    """Set while the buffer is being stored: changes wait, so the commit needs no copy."""
    refused: ZarrFuseError | OSError | None = None
    """Why the last commit was refused (or failed in the store: a close answered EIO must
    never be stored later), if nothing changed since: release then drops the changes and
    logs why (a flush's refusal alone is not final: numpy's ``tofile`` writes through a dup,
    flushed half-written at the first close and complete at the last)."""
    emptied: bool = False
    """Opened with O_TRUNC (or created), unchanged since: closing it stores nothing
    (ImageMagick opens its output so before writing it through another open; ``rm``, not
    this, deletes a chunk)."""
    closed_empty: bool = False
    """Closed while ``emptied``: its empty size is no longer shown for the chunk."""
    inode: int | None = None
    """The inode it is open on (its own, see ``page_cache``), whose size the kernel holds."""
    synced: bool = False
    """Opened with O_SYNC or O_DSYNC: every commit is durable, as fsync's."""

    async def settled(self) -> None:
        if self.committing is not None:
            await waited(self.committing.wait())

    async def read_into(self, offset: int, out: memoryview) -> int:
        """A writer reads its own buffer: what it wrote, committed or not."""
        return self.data.read_into(offset, out)

    async def write(self, offset: int, data: bytes) -> int:
        self.writers.committer.check_size(self.node, offset + len(data))
        await self.settled()
        self.data.write(offset, data)
        self.writers.changed(self)
        return len(data)

    async def truncate(self, size: int) -> bool:
        self.writers.committer.check_size(self.node, size)
        await self.settled()
        self.data.truncate(size)
        self.writers.changed(self)
        return True

    async def flush(self, *, durable: bool) -> None:
        """Commit the buffer (close, fsync); a refusal is raised for close() to return."""
        committer = self.writers.committer
        if self.emptied:  # O_TRUNC and nothing written: the chunk stays as it was
            log.debug("chunk %s opened with O_TRUNC and closed unwritten: left as stored",
                      self.node.coords)
            self.emptied, self.closed_empty = False, True  # the stored size shows again
            await committer.show_stored_state(self)
        elif self.dirty or durable:
            await committer.commit_writer(self, durable=durable or self.synced)

    async def release(self) -> None:
        """The last close: changes after the last flush (a shared mapping's pages, written
        back at munmap) are committed now; refused ones are dropped, with one line why."""
        committer = self.writers.committer
        try:
            if self.dirty and not self.refused:
                await committer.commit_writer(self, durable=self.synced)
        except ZarrFuseError as e:
            log.error("writes to chunk %s reached after close were not stored: %s",
                      self.node.coords, e)
        finally:
            self.writers.close(self)
        if self.dirty:
            if self.refused is not None:  # the last close's refusal: final
                log.error("refused to store chunk %s: %s", self.node.coords, self.refused)
            else:
                log.warning("discarding uncommitted writes to chunk %s", self.node.coords)
            await committer.show_stored_state(self)
        elif self.emptied:  # opened with O_TRUNC, never written nor closed: unchanged
            await committer.show_stored_state(self)

    def discard(self) -> None:
        """Opened, but refused before the kernel got it: it never was a writer."""
        self.writers.close(self)

    def shown_size(self) -> int | None:
        """The buffer's size (none once closed unwritten after O_TRUNC: its 0 would cut the
        next opener's reads)."""
        return None if self.closed_empty else len(self.data)


class OpenWriters:
    """The writers of each chunk, so a chunk's name and size show before its first commit."""

    def __init__(self, committer: Committer) -> None:
        self.committer = committer
        self._by_chunk: dict[Node, list[ChunkWriter]] = {}
        self._serials = itertools.count(1)
        self._none_open = trio.Event()  # set (and replaced) as the last writer closes

    def open(self, node: ChunkFile, data: WriteBuffer, *, emptied: bool = False) -> ChunkWriter:
        writer = ChunkWriter(node, data, self, serial=next(self._serials), emptied=emptied)
        self._by_chunk.setdefault(node, []).append(writer)
        return writer

    def changed(self, writer: ChunkWriter) -> None:
        """``writer``'s buffer changed: it is dirty and now the newest."""
        writer.dirty = True
        writer.refused = None
        writer.emptied = writer.closed_empty = False
        writer.serial = next(self._serials)

    def close(self, writer: ChunkWriter) -> None:
        writers = self._by_chunk.get(writer.node)
        if writers is not None:
            writers.remove(writer)
            if not writers:
                del self._by_chunk[writer.node]
                if not self._by_chunk:
                    self._none_open.set()
                    self._none_open = trio.Event()

    def size(self, node: Node) -> int | None:
        """The size the newest writer of ``node`` gave it; None if nobody writes it."""
        writers = [w for w in self._by_chunk.get(node, ()) if not w.closed_empty]
        if not writers:
            return None
        return len(max(writers, key=lambda w: w.serial).data)

    def count(self, node: Node) -> int:
        """How many writers of ``node`` are open."""
        return len(self._by_chunk.get(node, ()))

    def dirty(self, node: Node) -> bool:
        """Whether a writer of ``node`` holds changes not yet committed."""
        return any(w.dirty for w in self._by_chunk.get(node, ()))

    def chunks(self) -> list[ChunkFile]:
        return [writers[0].node for writers in self._by_chunk.values()]

    async def none_open(self) -> None:
        """Returns once no chunk file is open for writing."""
        if self._by_chunk:
            await self._none_open.wait()


class Committer:
    """Stores chunk files: checks, verification, parts; then drops the kernel's caches."""

    def __init__(self, namespace: Namespace, options: WriteOptions,
                 unused: Callable[[int], bool], committed: Callable[[ChunkFile], object]
                 ) -> None:
        """``unused``: whether an inode has no handle and no kept pages (``page_cache``);
        ``committed``: told each chunk file stored (a time set on it is shown no longer)."""
        self.namespace = namespace
        self._committed = committed
        self.options = options
        self._levels = LevelUpdates(namespace, self.drop_cache)
        self._unused = unused
        self.invalidate: Callable[[int, bool], Awaitable[None]] | None = None
        """Drops the kernel's cache of an inode, or of a name (set by the FUSE adapter)."""
        self.invalidate_entry: Callable[[int, str], Awaitable[None]] | None = None
        self.drops = 0
        """Nodes whose kernel caches were dropped so far: an answer computed while one was
        may describe what was dropped, and must not be kept long (``FuseOperations``)."""

    def check_size(self, node: ChunkFile, size: int) -> None:
        limit, array = self.options.max_chunk_bytes, node.array
        if limit is None and array.decoded_chunk_bytes is not None:
            limit = 2 * array.decoded_chunk_bytes + array.stored.parts.fixed_size + SIZE_LIMIT_SLACK
        if limit is not None and size > limit:
            raise FileTooBig(
                f"chunk {node.coords} of {node.array.path or '/'} would be {size} bytes, over "
                f"the limit of {limit} (--max-chunk-bytes)"
            )

    async def commit(
        self, node: ChunkFile, data: WriteBuffer, *, durable: bool, drop_cache: bool = True,
        renaming: bool = False,
    ) -> None:
        """Store ``data`` as the chunk, then drop kernel caches (``renaming``: see
        ``drop_cache``). ``data`` must not change until this returns."""
        self.check_size(node, len(data))
        views = data.pieces()
        await node.array.files.commit(node.coords, views, durable=durable,
                                      verify=self.options.verify)
        log.debug("committed chunk %s of %s (%d bytes)", node.coords, node.array.path,
                  len(data))
        self._committed(node)
        pyramid = node.array.pyramid
        if pyramid is not None and pyramid.lower:
            await self._levels.update(node.array, node.array.files.region(node.coords),
                                      durable=durable)
        if drop_cache:
            await self.drop_cache(node, renaming=renaming)

    async def commit_writer(self, writer: ChunkWriter, *, durable: bool) -> None:
        """Commit a writer's buffer; its changes wait meanwhile. A refused commit leaves the
        writer dirty, the kernel shows the stored chunk again, and close() or fsync() gets
        the error."""
        await writer.settled()
        writer.committing = trio.Event()
        refused: ZarrFuseError | OSError | None = None
        try:
            await self.commit(writer.node, writer.data, durable=durable, drop_cache=False)
        except ZarrFuseError as e:
            log.info("not storing chunk %s as it is now: %s", writer.node.coords, e)
            e.expected = True  # not final (see ``refused``): release logs what is, once
            writer.refused = refused = e
        except OSError as e:  # the store failed: release must not store it after an EIO
            writer.refused = refused = e
        else:
            writer.dirty = False
        finally:
            writer.committing.set()
            writer.committing = None
        # Only now: dropping the pages of a mapping may write its dirty pages back to this
        # writer first, and those writes wait for the commit to end.
        if refused is not None:
            await self.show_stored_state(writer, ask_store=isinstance(refused, ZarrFuseError))
            raise refused
        await self.drop_cache(writer.node)

    async def drop_pages(self, node: Node) -> None:
        """Drop the kernel's cache of a node that is not a chunk file (a whole image's
        version, after the store changed)."""
        self.drops += 1
        inode = self.namespace.known_inode(node)
        if inode is not None and self.invalidate is not None:
            await self.invalidate(inode, False)

    async def drop_cache(self, node: ChunkFile, *, renaming: bool = False,
                         by_another: bool = False) -> None:
        """After a commit, or writes not committed: the chunk's name gets a fresh inode and
        the kernel forgets the old one's attributes and the name's entry (why: docs/
        contributing.md, 'Commits and the kernel'). ``renaming``: inside a rename, which
        replaces the entry itself. ``by_another``: another program changed the chunk."""
        self.drops += 1
        inode = self.namespace.known_inode(node)
        if inode is None:
            if not renaming:
                await self._forget_absence(node)
            return
        moved, entry = False, None
        if not self._unused(inode):
            moved, entry = True, None if renaming else self._known_entry(node)
            self.namespace.retire(node)
        elif by_another:
            entry = self._known_entry(node)
        if self.invalidate is not None:
            await self.invalidate(inode, moved)
        if entry is not None and self.invalidate_entry is not None:
            await self.invalidate_entry(*entry)

    async def _forget_absence(self, node: ChunkFile) -> None:
        """A chunk the kernel holds no inode of changed (another program stored it): the
        kernel may remember its name, or a directory on its path, as absent (for an hour on
        a read-only mount), so the first name on the path it holds no inode of is dropped."""
        if self.invalidate_entry is None:
            return
        for directory, name, step in node.steps():
            if self.namespace.known_inode(step) is None:
                parent = self.namespace.known_inode(directory)
                if parent is not None:
                    await self.invalidate_entry(parent, name)
                return

    def _known_entry(self, node: ChunkFile) -> tuple[int, str] | None:
        """The kernel's entry of ``node``: its directory's inode and its name, if known."""
        parent, name = node.parent()
        parent_inode = self.namespace.known_inode(parent)
        return None if parent_inode is None else (parent_inode, name)

    async def show_stored_state(self, writer: ChunkWriter, *, ask_store: bool = True) -> None:
        """After writes that were not committed, the kernel shows the stored chunk again
        (it took the writer's size as the file's); one not stored at all loses its name too,
        before close() returns (unless ``ask_store`` is false: the store just failed)."""
        node = writer.node
        if writer.inode is not None and self.invalidate is not None:
            await self.invalidate(writer.inode, True)  # the size the kernel took from it
        await self.drop_cache(node)
        if node.array.files.every_chunk_exists or not ask_store:
            return  # its name stays
        if await node.array.stored.size(node.coords) is not None:
            return
        entry = self._known_entry(node)
        if entry is not None and self.invalidate_entry is not None:
            await self.invalidate_entry(*entry)
