"""Multi-part commits on a local directory that a crash leaves old or new, never mixed:
records in ``.zarrfuse-commits/ID/`` (one locked directory per mount) around temp files
renamed over their keys. How it works and why: docs/writing.md, "Journals".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Sequence

from zarrfuse.storage.beneath import Root

__all__ = ["JOURNAL_DIR", "CommitJournal"]

log = logging.getLogger(__name__)

JOURNAL_DIR = ".zarrfuse-commits"
_RECORD_ENDINGS = (".pending", ".commit", ".pending.tmp", ".commit.tmp")

WriteAll = Callable[[int, Sequence[memoryview]], None]


class CommitJournal:
    """The journal of one local store (``prefix``: the store's path below ``root``)."""

    def __init__(self, root: Root, prefix: str, write_all: WriteAll) -> None:
        self._root = root
        self._prefix = prefix
        self._write_all = write_all
        self._top = f"{prefix}{JOURNAL_DIR}"
        self._dir = f"{self._top}/{uuid.uuid4().hex}"
        """This mount's records (see the module)."""
        self._held: int | None = None
        """The descriptor of ``_dir``, locked while a commit is under way."""
        self._lock = threading.Lock()
        self._active = 0
        """Transactions under way: the journal directory is removed when none is, so the
        store shows no stray directory to zarr (which warns of it) between commits."""

    def commit(self, parts: Sequence[tuple[str, Sequence[memoryview]]], durable: bool) -> list[int]:
        """Replace every ``(key, pieces)`` (keys relative to ``root``); the new times."""
        tx = uuid.uuid4().hex
        renames = [(f"{key}.{tx}.partial", key) for key, _ in parts]
        with self._lock:
            self._active += 1
            if self._held is None:
                self._held = self._locked_dir()
        try:
            self._record(tx, "pending", renames, durable)
            mtimes = []
            try:
                for (temp, _), (_, pieces) in zip(renames, parts, strict=True):
                    mtimes.append(self._write_temp(temp, pieces, durable))
                self._record(tx, "commit", renames, durable)
            except BaseException:
                self._remove_temps(renames)
                raise
            self._rename_all(renames, durable)
            return mtimes
        finally:
            self._remove_records(self._dir, tx)
            with self._lock:
                self._active -= 1
                if self._active == 0 and self._held is not None:
                    self._remove_dir(self._dir)  # while locked: nobody else removes it
                    os.close(self._held)  # unlocks
                    self._held = None
                    self._remove_dir(self._top)

    def _locked_dir(self) -> int:
        """This mount's record directory, made and locked (retried if removed meanwhile)."""
        for _ in range(20):
            try:
                fd = self._root.make_dirs(self._dir)
            except FileNotFoundError:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink > 0:  # not removed before the lock was ours
                return fd
            os.close(fd)
        raise OSError(errno.EIO, f"{self._dir}: cannot make the commit record directory")

    def _record_dirs(self, *, dead_only: bool) -> list[tuple[str, int | None]]:
        """Directories holding records (the old flat layout and each mount's), each with its
        lock or None; ``dead_only``: those whose lock is free, returned locked."""
        fd = self._root.open_dir(self._top)
        if fd is None:
            return []
        try:
            entries = list(os.scandir(fd))
        finally:
            os.close(fd)
        found: list[tuple[str, int | None]] = [(self._top, None)]
        for entry in entries:
            path = f"{self._top}/{entry.name}"
            if not entry.is_dir(follow_symlinks=False) or path == self._dir:
                continue
            if not dead_only:
                found.append((path, None))
                continue
            sub = self._root.open_dir(path)
            if sub is None:
                continue
            try:
                fcntl.flock(sub, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live mount's commit is under way there
                os.close(sub)
                continue
            found.append((path, sub))
        return found

    @staticmethod
    def _transactions(names: list[str]) -> list[str]:
        return sorted({n.split(".", 1)[0] for n in names if n.endswith(_RECORD_ENDINGS)})

    def _names(self, where: str) -> list[str]:
        fd = self._root.open_dir(where)
        if fd is None:
            return []
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def recover(self) -> tuple[int, int]:
        """Finish what a crash interrupted: (rolled forward, rolled back); live mounts' alone."""
        forward = back = 0
        for where, held in self._record_dirs(dead_only=True):
            try:
                for tx in self._transactions(self._names(where)):
                    committed = self._read_record(where, tx, "commit")
                    if committed is not None:
                        self._rename_all(committed, durable=True)
                        forward += 1
                    else:
                        self._remove_temps(self._read_record(where, tx, "pending") or [])
                        back += 1
                    self._remove_records(where, tx)
                if where != self._top:
                    self._remove_dir(where)  # while locked, so no mount is using it
            finally:
                if held is not None:
                    os.close(held)
        self._remove_dir(self._top)
        if forward or back:
            log.warning("%s: finished %d commit(s) a crash interrupted and undid %d unfinished "
                        "one(s): every chunk is its old or its new value", self._root.path,
                        forward, back)
        return forward, back

    def finished_view(self) -> tuple[dict[str, str], int]:
        """Without changing anything: the new file that replaces each part of an interrupted
        commit with a record, and how many commits were interrupted."""
        finished: dict[str, str] = {}
        interrupted = 0
        for where, _ in self._record_dirs(dead_only=False):
            transactions = self._transactions(self._names(where))
            interrupted += len(transactions)
            for tx in transactions:
                for temp, key in self._read_record(where, tx, "commit") or []:
                    if self._root.stat(temp) is not None:  # else renamed before the crash
                        finished[key] = temp
        return finished, interrupted

    # --- steps -------------------------------------------------------------------------------

    def _parent(self, key: str) -> tuple[int, str]:
        parent, _, name = key.rpartition("/")
        return self._root.make_dirs(parent or "."), name

    def _write_temp(self, temp: str, pieces: Sequence[memoryview], durable: bool) -> int:
        dir_fd, name = self._parent(temp)
        try:
            return self._new_file(dir_fd, name, pieces, durable)
        finally:
            os.close(dir_fd)

    def _new_file(
        self, dir_fd: int, name: str, pieces: Sequence[memoryview], durable: bool
    ) -> int:
        """Create ``name`` (never through a symlink) with ``pieces``; its mtime."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o644, dir_fd=dir_fd)
        try:
            self._write_all(fd, pieces)
            if durable:
                os.fsync(fd)
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)

    def _record(
        self, tx: str, kind: str, renames: Sequence[tuple[str, str]], durable: bool
    ) -> None:
        data = json.dumps([list(r) for r in renames]).encode()
        dir_fd = self._root.make_dirs(self._dir)  # held (locked) by commit meanwhile
        try:
            temp = f"{tx}.{kind}.tmp"
            self._new_file(dir_fd, temp, [memoryview(data)], durable)
            os.replace(temp, f"{tx}.{kind}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if durable:
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _read_record(self, where: str, tx: str, kind: str) -> list[tuple[str, str]] | None:
        fd = self._root.open_regular(f"{where}/{tx}.{kind}")
        if fd is None:
            return None
        with open(fd, "rb") as f:
            try:
                return [(str(a), str(b)) for a, b in json.loads(f.read())]
            except (ValueError, TypeError):
                log.warning("%s: unreadable commit record %s.%s: left alone", self._root.path,
                            tx, kind)
                return None

    def _rename_all(self, renames: Sequence[tuple[str, str]], durable: bool) -> None:
        for temp, key in renames:
            dir_fd, temp_name = self._parent(temp)
            try:
                with contextlib.suppress(FileNotFoundError):  # renamed before the crash
                    os.replace(temp_name, key.rpartition("/")[2], src_dir_fd=dir_fd,
                               dst_dir_fd=dir_fd)
                if durable:
                    os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _remove_temps(self, renames: Sequence[tuple[str, str]]) -> None:
        for temp, _ in renames:
            parent, _, name = temp.rpartition("/")
            dir_fd = self._root.open_dir(parent or ".")
            if dir_fd is None:
                continue
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)

    def _remove_records(self, where: str, tx: str) -> None:
        dir_fd = self._root.open_dir(where)
        if dir_fd is None:
            return
        try:
            for kind in ("commit", "pending", "commit.tmp", "pending.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{tx}.{kind}", dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def _remove_dir(self, path: str) -> None:
        parent, _, name = path.rpartition("/")
        dir_fd = self._root.open_dir(parent or ".")
        if dir_fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError, OSError):  # not empty: left
                os.rmdir(name, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
