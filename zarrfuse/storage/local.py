"""A local directory as mount storage: plain system calls in worker threads (a ``pread`` costs
10 us, zarr's asyncio round trip 140-390 us, measured), every path resolved beneath the store
root (``beneath``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from zarrfuse.errors import ConfigurationError, UnfitDocument
from zarrfuse.limits import MAX_DOCUMENT_BYTES
from zarrfuse.storage.base import Capabilities, Document, PartReader, Stat, child_key
from zarrfuse.storage.beneath import NotRegular, Root
from zarrfuse.storage.file_writes import write_all
from zarrfuse.storage.local_files import LocalPartReader, open_regular_or_eio, read_to_end
from zarrfuse.storage.local_journal import CommitJournal
from zarrfuse.storage.local_warming import KernelWarming

__all__ = ["LocalBackend"]

log = logging.getLogger(__name__)


class LocalBackend:
    """A directory on a local filesystem, as laid out by zarr's ``LocalStore``."""

    def __init__(self, root: Path, *, symlink_root: Path | None = None) -> None:
        """``symlink_root`` (an ancestor of ``root``) widens where symlinks may lead, for
        stores made of symlinks into a dataset (git-annex, DataLad); default: ``root``."""
        self.root = root
        self.capabilities = Capabilities(
            remote=False, open_reader_nowait=self.open_reader_nowait,
            warm_after=self.warm_after, list_stats_share=self.list_stats_share,
            watched_root=str(root))
        self._beneath = Root(str(symlink_root or root))
        real = os.path.realpath(root)
        if real != self._beneath.path and not real.startswith(self._beneath.path + os.sep):
            raise ConfigurationError(f"--symlink-root {symlink_root}: {root} is not inside it")
        inside = os.path.relpath(real, self._beneath.path)
        self._prefix = "" if inside == "." else inside + "/"
        self._journal = CommitJournal(self._beneath, self._prefix, write_all)
        self._warming = KernelWarming(
            lambda key, cached_only: self._beneath.open_regular(
                key, quiet=True, cached_only=cached_only
            )
        )
        self._finished: dict[str, str] = {}
        """Parts read from an interrupted commit's new files (``show_recovered``)."""

    def _key(self, key: str) -> str:
        """The key as a path relative to the resolution root."""
        return self._prefix + key.strip("/")

    def _entries(self, prefix: str, share: int = 0, shares: int = 1,
                 ) -> Iterator[tuple[str, os.stat_result]]:
        """The entries of a store directory with their stats; a symlink is what it leads to
        beneath the root (skipped if it leads out). Special files are listed: reading one is
        EIO, never an absent chunk read as the fill value. Only the names whose hash is
        ``share`` modulo ``shares``."""
        fd = self._beneath.open_dir(self._key(prefix))
        if fd is None:
            return
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if shares > 1 and hash(entry.name) % shares != share:
                        continue
                    try:
                        if entry.is_symlink():  # None: dangling, or leads out of the root
                            st = self._beneath.stat(self._key(f"{prefix}/{entry.name}"))
                            if st is None or (stat.S_ISDIR(st.st_mode) and self._loops(
                                    prefix, entry.name)):
                                continue
                        else:
                            st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # removed while listing
                        continue
                    yield entry.name, st
        finally:
            os.close(fd)

    def _loops(self, prefix: str, name: str) -> bool:
        """Whether the directory symlink ``prefix/name`` leads to a directory on its own way
        down (``find`` would walk it until ENAMETOOLONG): not shown, with one log line."""
        base = self._beneath.path
        target = os.path.realpath(os.path.join(base, self._key(f"{prefix}/{name}")))
        store = os.path.realpath(self.root)
        parts = [p for p in prefix.strip("/").split("/") if p]
        chain = {store} | {
            os.path.realpath(os.path.join(store, *parts[:i])) for i in range(1, len(parts) + 1)
        }
        loops = any(here == target or here.startswith(target + os.sep) for here in chain)
        if loops:
            self._beneath.warn_once(f"loop:{prefix}/{name}", "%s/%s: a symlink to a directory "
                                    "it is inside (a loop): not shown", prefix, name)
        return loops

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        return self.list_stats_share(prefix, 0, 1)

    def list_stats_share(self, prefix: str, share: int, shares: int) -> dict[str, Stat]:
        stats = {
            name: Stat(st.st_size, st.st_mtime_ns)
            for name, st in self._entries(prefix, share, shares) if not stat.S_ISDIR(st.st_mode)
        }
        for name in stats if self._finished else ():
            found = self.stat(child_key(prefix, name))
            if found is not None:
                stats[name] = found
        return stats

    def list_names(self, prefix: str) -> set[str]:
        fd = self._beneath.open_dir(self._key(prefix))
        if fd is None:
            return set()
        try:
            with os.scandir(fd) as scan:  # d_type: no stat per entry, but for symlinks
                entries = list(scan)
            names = {e.name for e in entries  # files, and special files (see _entries)
                     if not e.is_dir(follow_symlinks=False) and not e.is_symlink()}
            linked = [e.name for e in entries if e.is_symlink()]
        finally:
            os.close(fd)
        for name in linked:
            st = self._beneath.stat(self._key(f"{prefix}/{name}"))
            if st is not None and not stat.S_ISDIR(st.st_mode):
                names.add(name)
        return names

    def list_subdirs(self, prefix: str) -> list[str]:
        return [name for name, st in self._entries(prefix) if stat.S_ISDIR(st.st_mode)]

    def stat(self, key: str) -> Stat | None:
        st = self._beneath.stat(self._read_key(self._key(key)))  # a special file: present
        return Stat(st.st_size, st.st_mtime_ns) if st and not stat.S_ISDIR(st.st_mode) else None

    def stat_names(self, prefix: str, names: Sequence[str]) -> list[Stat | None]:
        """As :meth:`stat` of each name: the directory resolved once, each plain name stat'ed
        in it unfollowed (a third of a resolution per key); symlinks go through :meth:`stat`."""
        fd = self._beneath.open_dir(self._key(prefix))
        if fd is None:
            return [None] * len(names)
        out: list[Stat | None] = []
        try:
            for name in names:
                key = child_key(prefix, name)
                if "/" in name or name in ("", ".", "..") or self._key(key) in self._finished:
                    out.append(self.stat(key))
                    continue
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    out.append(None)
                    continue
                if stat.S_ISLNK(st.st_mode):  # resolved beneath the root, as stat does
                    out.append(self.stat(key))
                elif stat.S_ISDIR(st.st_mode):
                    out.append(None)
                else:
                    out.append(Stat(st.st_size, st.st_mtime_ns))
        finally:
            os.close(fd)
        return out

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        # an open fd's fstat is the truth
        return LocalPartReader(self._beneath, [self._read_key(self._key(k)) for k in keys])

    def open_reader_nowait(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader | None:
        """The parts opened from the kernel's caches alone, in microseconds; None if a path is
        not cached (the caller opens in a worker thread: a hop costs 0.1-0.4 ms)."""
        try:
            return LocalPartReader(
                self._beneath, [self._read_key(self._key(k)) for k in keys], cached_only=True
            )
        except BlockingIOError:
            return None

    def read_all(self, key: str) -> bytes | None:
        try:
            document = self.read_document(key)
        except UnfitDocument as e:  # a reader of bytes gets an I/O error, as for any file
            log.warning("%s", e)
            raise OSError(errno.EIO, str(e)) from None
        return None if document is None else document.data

    def read_range(self, key: str, start: int, stop: int) -> bytes:
        data = self._pread(key, lambda size: (start, stop - start))
        if data is None:
            raise FileNotFoundError(errno.ENOENT, f"{key}: not stored")
        if len(data[0]) != stop - start:
            raise OSError(errno.EIO, f"{key}: asked for bytes {start}-{stop}, "
                                     f"the file has {data[1]}")
        return data[0]

    def read_tail(self, key: str, count: int) -> tuple[bytes, int | None] | None:
        return self._pread(key, lambda size: (max(size - count, 0), min(count, size)))

    def _pread(
        self, key: str, where: Callable[[int], tuple[int, int]]
    ) -> tuple[bytes, int] | None:
        """One read of the file ``key`` at ``where(its size)`` (offset, count); None if absent."""
        fd = open_regular_or_eio(self._beneath, self._read_key(self._key(key)))
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            offset, count = where(size)
            return os.pread(fd, count, offset), size
        finally:
            os.close(fd)

    def read_document(self, key: str) -> Document | None:
        try:
            fd = self._beneath.open_regular(self._key(key), quiet=True)
        except NotRegular as e:  # the node's reader says so, in one line
            raise UnfitDocument(f"{key}: {e.strerror}: not a metadata document") from None
        if fd is None:
            return None
        try:
            found = os.fstat(fd)
            data = read_to_end(fd, found.st_size, MAX_DOCUMENT_BYTES)
        finally:
            os.close(fd)
        if data is None:
            raise UnfitDocument(f"{key}: {found.st_size} bytes when opened, over the "
                                f"{MAX_DOCUMENT_BYTES} a metadata document may have")
        return Document(data, found.st_mtime_ns)

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> int:
        # Same scheme as zarr's LocalStore: a unique temp file beside the target renamed over
        # it (old or new after a crash), both names relative to the directory resolved beneath.
        parent, _, name = self._key(key).rpartition("/")
        dir_fd = self._beneath.make_dirs(parent) if parent else self._beneath.make_dirs(".")
        try:
            temp = f"{name}.{uuid.uuid4().hex}.partial"
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                             | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
                try:
                    write_all(fd, pieces)
                    if durable:
                        os.fsync(fd)
                    mtime_ns = os.fstat(fd).st_mtime_ns  # the rename below keeps it
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=dir_fd)
                raise
            if durable:
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return mtime_ns

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        if len(parts) == 1:
            return [self.write(parts[0][0], parts[0][1], durable=durable)]
        return self._journal.commit([(self._key(k), p) for k, p in parts], durable)

    def recover(self) -> tuple[int, int]:
        return self._journal.recover()

    def show_recovered(self) -> int:
        self._finished, interrupted = self._journal.finished_view()
        if interrupted:
            log.warning("%s: %d commit(s) a crash interrupted: shown as recovery will leave "
                        "them, nothing changed; run `zarrfuse verify --repair %s` (or mount "
                        "it writable) to finish them in the store", self.root, interrupted,
                        self.root)
        return interrupted

    def _read_key(self, key: str) -> str:
        """Where ``key`` is read: an interrupted commit's new file (``show_recovered``)."""
        return self._finished.get(key, key)

    def set_mtime(self, key: str, mtime_ns: int) -> bool:
        """Stored with the file (``os.utime``), so every later mount shows it too."""
        fd = open_regular_or_eio(self._beneath, self._key(key))
        if fd is not None:  # None: an absent optional part
            try:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            finally:
                os.close(fd)
        return True

    def delete(self, key: str) -> None:
        parent, _, name = self._key(key).rpartition("/")
        dir_fd = self._beneath.open_dir(parent or ".")
        if dir_fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.unlink(name, dir_fd=dir_fd)  # a symlink itself, never what it leads to
        finally:
            os.close(dir_fd)

    def warm_after(
        self, key: str, following: Callable[[], Sequence[tuple[str, int]]], *, waited: bool
    ) -> None:
        """The file ``key`` was read to its end: warm the ``following()`` files."""
        self._warming.after(
            self._read_key(self._key(key)),
            lambda: [(self._read_key(self._key(k)), size) for k, size in following()],
            waited=waited,
        )

    def close(self) -> None:
        self._warming.close()
        self._beneath.close()
