"""Blocks of remote objects kept on local disk, across mounts (``--cache-dir``). A block is
named by a hash of store, key, the object's validator and block number (a changed object's
old blocks are never found again; they age out), written whole by rename, and evicted least
recently used first under a ``flock``: docs/sources.md, "A disk cache across mounts".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["BLOCK_SIZE", "DiskCache"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4 << 20
"""Bytes per cached block: a chunk of up to 4 MiB is one file; a larger object, several, so
a range read of a big shard fetches and keeps only the blocks it touches."""
EVICT_TO = 0.9
"""Eviction removes files until the total is this fraction of the limit (hysteresis)."""
STALE_TEMP_SECONDS = 600
"""Temp files older than this were left by a crashed writer and are removed at a scan."""
TEMP_SUFFIX = ".tmp"


class DiskCache:
    """A cache directory, at most ``limit`` bytes of blocks."""

    def __init__(self, root: str | os.PathLike[str], limit: int) -> None:
        self.root = Path(root)
        self.limit = limit
        self._blocks = self.root / "blocks"
        self._blocks.mkdir(parents=True, exist_ok=True)
        self._listings = self.root / "listings"
        self._listings.mkdir(exist_ok=True)
        self._lock_path = self.root / ".lock"
        self._lock = threading.Lock()
        self._total = self._scan_and_evict(force=True)

    @staticmethod
    def block_name(identity: str) -> str:
        return hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()

    def _path(self, name: str) -> Path:
        return self._blocks / name[:2] / name[2:]

    def holds(self, name: str) -> bool:
        """Whether the block ``name`` is on disk (a stat, nothing read)."""
        return self._path(name).exists()

    # --- reading -----------------------------------------------------------------------------

    def read(self, name: str, length: int, offset: int, out: memoryview, *, nowait: bool) -> int:
        """Copy bytes ``offset..`` of block ``name`` (whole size ``length``) into ``out``;
        the count copied, 0 on a miss (or, with ``nowait``, if the disk would be waited for).
        A file of the wrong size is not served (and removed)."""
        try:
            fd = os.open(self._path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return 0
        try:
            if os.fstat(fd).st_size != length:
                log.warning("cache block %s has the wrong size: removed", name)
                with contextlib.suppress(OSError):
                    os.unlink(self._path(name))
                return 0
            try:
                got = os.preadv(fd, [out], offset, os.RWF_NOWAIT if nowait else 0)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EOPNOTSUPP, errno.EINVAL) and nowait:
                    return 0
                raise
            if got and not nowait:
                os.utime(fd)  # least recently used goes first
            return got
        finally:
            os.close(fd)

    # --- writing -----------------------------------------------------------------------------

    def write(self, name: str, data: bytes | bytearray | memoryview) -> None:
        """Keep ``data`` as block ``name``; best effort: a full disk never fails the read."""
        path = self._path(name)
        temp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")
        try:
            path.parent.mkdir(exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(temp, path)
        except OSError as e:
            log.warning("cannot keep a block in %s: %s", self.root, e)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return
        with self._lock:
            self._total += len(data)
            over = self._total > self.limit
        if over:
            self._total = self._scan_and_evict()

    # --- listings ----------------------------------------------------------------------------

    def read_listing(self, name: str, max_age: float) -> dict[str, Any] | None:
        """A listing kept by :meth:`write_listing` at most ``max_age`` seconds ago."""
        path = self._listings / name
        try:
            if time.time() - path.stat().st_mtime > max_age:
                return None
            found = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def write_listing(self, name: str, listing: dict[str, Any]) -> None:
        """Keep a listing (whole, by rename; best effort)."""
        path = self._listings / name
        temp = path.with_name(f"{name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")
        try:
            temp.write_bytes(json.dumps(listing).encode())
            os.replace(temp, path)
        except OSError as e:
            log.warning("cannot keep a listing in %s: %s", self.root, e)
            with contextlib.suppress(OSError):
                os.unlink(temp)

    # --- eviction ----------------------------------------------------------------------------

    def _entries(self) -> Iterator[os.DirEntry[str]]:
        with os.scandir(self._blocks) as parents:
            for parent in parents:
                if parent.is_dir(follow_symlinks=False):
                    with os.scandir(parent.path) as files:
                        yield from files

    def _scan_and_evict(self, force: bool = False) -> int:
        """Evict least recently used blocks (and stale temps) to under the limit; the total
        left. Skipped while another mount evicts."""
        with open(self._lock_path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if force else fcntl.LOCK_NB))
            except BlockingIOError:
                return self._total
            now = time.time()
            blocks: list[tuple[float, int, str]] = []
            for entry in self._entries():
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat(follow_symlinks=False)
                    if entry.name.endswith(TEMP_SUFFIX):
                        if now - st.st_mtime > STALE_TEMP_SECONDS:
                            os.unlink(entry.path)
                    else:
                        blocks.append((st.st_mtime, st.st_size, entry.path))
            total = sum(size for _, size, _ in blocks)
            if total <= self.limit:
                return total
            target = int(self.limit * EVICT_TO)
            removed = 0
            for _, size, path in sorted(blocks):
                if total <= target:
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                total -= size
                removed += 1
            log.info("cache %s: removed %d least recently used blocks, %d bytes kept",
                     self.root, removed, total)
            return total
