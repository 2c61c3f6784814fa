"""Paths of a local store resolved beneath its root (``openat2(RESOLVE_BENEATH)``, through
ctypes), and only regular files opened: first ``O_PATH``, checked, then reopened through
``/proc/self/fd``. Why, and the fallback without openat2: docs/sources.md, "Untrusted stores".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import stat
from typing import Final

__all__ = ["NotRegular", "OutsideRoot", "Root"]

log = logging.getLogger(__name__)

_SYS_OPENAT2: Final = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437}
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_BENEATH: Final = 0x08
_RESOLVE_CACHED: Final = 0x20  # Linux 5.12+: EAGAIN unless every component is cached


LOCAL_DISK: Final = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "bcachefs", "jfs", "tmpfs",
    "ramfs", "overlay", "vfat", "exfat", "ntfs3",
})
"""Filesystems whose open of a cached path never waits on a device or a server."""


def _filesystem_type(path: str) -> str:
    """The type of the filesystem ``path`` is on (/proc/self/mountinfo), "" if unknown."""
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if "-" not in fields:
                    continue
                point = _unescape(fields[4])
                dash = fields.index("-")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best) and len(fields) > dash + 1:
                    best, kind = point, fields[dash + 1]
    except OSError:
        return ""
    return kind


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


class OutsideRoot(PermissionError):
    """The path resolves outside the store's root (a symlink leads out): EACCES."""


class NotRegular(OSError):
    """The key names a FIFO, socket or device: never opened (EIO)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall_number = _SYS_OPENAT2.get(os.uname().machine)
_WARNED_AT_MOST = 4096  # a hostile store with millions of bad links must not grow memory


RACE_RETRIES: Final = 64
"""Resolutions asked again when openat2 says EAGAIN (a rename anywhere raced a ".."; 1 open
in 15 to 30 beside a loop of renames, measured: docs/sources.md, "Untrusted stores")."""


def _openat2(dir_fd: int, path: str, flags: int, resolve: int = 0) -> int:
    """The descriptor openat2 gives ``path`` beneath ``dir_fd``; OSError with its errno.
    A raced EAGAIN is asked again, then EIO, never a bare EAGAIN; with RESOLVE_CACHED it is
    answered at once (it may mean "not cached": the caller opens again without it)."""
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | resolve)
    encoded = os.fsencode(path)
    cached_only = bool(resolve & _RESOLVE_CACHED)
    for _ in range(1 if cached_only else RACE_RETRIES):
        fd = _libc.syscall(
            _syscall_number, dir_fd, encoded, ctypes.byref(how), ctypes.sizeof(how)
        )
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.EAGAIN:
            raise OSError(code, os.strerror(code), path)
    if cached_only:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)
    raise OSError(errno.EIO, f"resolving it raced with renames {RACE_RETRIES} times", path)


class Root:
    """A local store's root directory, and every path beneath it resolved safely."""

    def __init__(self, path: str) -> None:
        self.path = os.path.realpath(path)
        self._warned: set[str] = set()
        self._fd = os.open(self.path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self._use_openat2 = _syscall_number is not None
        if self._use_openat2:
            try:
                os.close(_openat2(self._fd, ".", os.O_PATH))
            except OSError as e:
                if e.errno not in (errno.ENOSYS, errno.EPERM):  # EPERM: seccomp filters
                    raise
                self._use_openat2 = False
        self.can_resolve_cached = (
            self._use_openat2
            and _filesystem_type(self.path) in LOCAL_DISK
            and self._kernel_resolves_cached()
        )
        """Whether :meth:`open_regular` can be asked not to wait (``cached_only``): on a
        network filesystem even an open of a cached path may ask the server (NFS's
        close-to-open check), so there every open may wait."""
        if not self._use_openat2:
            self.warn_once("no-openat2", "%s: the kernel has no openat2; symlinks are checked "
                           "with realpath (racy if the store changes meanwhile)", self.path)

    def _kernel_resolves_cached(self) -> bool:
        """Whether the kernel knows ``RESOLVE_CACHED`` (Linux 5.12+; EINVAL before)."""
        try:
            os.close(_openat2(self._fd, ".", os.O_PATH, _RESOLVE_CACHED))
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EAGAIN):
                raise
            return e.errno == errno.EAGAIN
        return True

    def close(self) -> None:
        os.close(self._fd)

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """One WARNING per ``key`` for this store (each mount's own, not the process's)."""
        if key not in self._warned and len(self._warned) < _WARNED_AT_MOST:
            self._warned.add(key)
            log.warning(message, *args)

    def _refused(self, key: str) -> OutsideRoot:
        self.warn_once(key, "%s: refused: it resolves outside the store root %s", key, self.path)
        return OutsideRoot(errno.EACCES, "resolves outside the store root", key)

    def open_path(self, key: str, *, directory: bool = False, cached_only: bool = False) -> int:
        """An ``O_PATH`` descriptor of ``key`` resolved beneath the root (symlinks followed
        while they stay beneath). FileNotFoundError if absent; OutsideRoot if it leaves.
        ``cached_only``: BlockingIOError unless the kernel resolves the path from its caches
        alone (no disk read): the caller may then be a thread that must not wait."""
        flags = os.O_PATH | (os.O_DIRECTORY if directory else 0)
        key = key.strip("/") or "."
        if cached_only and not self.can_resolve_cached:
            raise BlockingIOError(errno.EAGAIN, "cannot tell without waiting", key)
        if self._use_openat2:
            try:
                return _openat2(self._fd, key, flags, _RESOLVE_CACHED if cached_only else 0)
            except OSError as e:
                if e.errno == errno.EAGAIN:  # only ever with cached_only (see _openat2)
                    raise BlockingIOError(e.errno, "not in the kernel's caches", key) from None
                if e.errno == errno.EXDEV:  # ".." or an absolute symlink: resolve and retry
                    if cached_only:  # realpath may wait on the disk
                        raise BlockingIOError(errno.EAGAIN, "a symlink to resolve", key) from None
                    return self._open_resolved(key, flags)
                if e.errno in (errno.ENOENT, errno.ENOTDIR):
                    raise FileNotFoundError(e.errno, e.strerror, key) from None
                if e.errno == errno.ELOOP:
                    raise self._refused(key) from None
                raise
        return self._open_resolved(key, flags)

    def _open_resolved(self, key: str, flags: int) -> int:
        """Absolute symlinks into the store: resolve, then open beneath the root again."""
        real = os.path.realpath(os.path.join(self.path, key))
        if real != self.path and not real.startswith(self.path + os.sep):
            raise self._refused(key)
        inside = os.path.relpath(real, self.path)
        if self._use_openat2:
            try:
                return _openat2(self._fd, inside, flags)
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.ENOTDIR):
                    raise FileNotFoundError(e.errno, e.strerror, key) from None
                if e.errno in (errno.EXDEV, errno.ELOOP):
                    raise self._refused(key) from None
                raise
        try:
            return os.open(real, flags | os.O_CLOEXEC | os.O_NOFOLLOW)
        except (NotADirectoryError, FileNotFoundError) as e:
            raise FileNotFoundError(errno.ENOENT, str(e), key) from None

    def stat(self, key: str) -> os.stat_result | None:
        """The stat of what ``key`` resolves to beneath the root; None if absent or if it
        leads out of the root (logged once): lookups and listings agree on what exists."""
        try:
            fd = self.open_path(key)
        except (FileNotFoundError, OutsideRoot):
            return None
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def open_regular(
        self, key: str, *, quiet: bool = False, cached_only: bool = False
    ) -> int | None:
        """A read-only descriptor of the regular file ``key``; None if absent or leading out.
        A FIFO, socket or device raises NotRegular unopened (one log line unless ``quiet``);
        ``cached_only``: as in :meth:`open_path`."""
        try:
            path_fd = self.open_path(key, cached_only=cached_only)
        except (FileNotFoundError, OutsideRoot):
            return None
        try:
            mode = os.fstat(path_fd).st_mode
            if stat.S_ISDIR(mode):
                return None  # a directory where a file is asked for: no such file
            if not stat.S_ISREG(mode):
                if not quiet:
                    self.warn_once(f"special:{key}", "%s: not a regular file (%s); never "
                                   "opened", key, _kind(mode))
                raise NotRegular(errno.EIO, f"not a regular file ({_kind(mode)})", key)
            return os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(path_fd)

    def open_dir(self, key: str) -> int | None:
        """A descriptor of directory ``key``; None if absent, not a directory, or leading out."""
        try:
            return self._open_dir(key)
        except (FileNotFoundError, NotADirectoryError, OutsideRoot):
            return None

    def _open_dir(self, key: str) -> int:
        path_fd = self.open_path(key, directory=True)
        try:
            return os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        finally:
            os.close(path_fd)

    def make_dirs(self, key: str) -> int:
        """A descriptor of directory ``key``, missing components made one at a time beneath
        the root (a symlinked component that leads out is refused)."""
        fd = self.open_dir(key)
        if fd is not None:
            return fd
        parent, _, name = key.strip("/").rpartition("/")
        parent_fd = self.make_dirs(parent) if parent else self._open_dir(".")
        try:  # FileExistsError: made meanwhile, or a symlink (resolved beneath below)
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=parent_fd)
        finally:
            os.close(parent_fd)
        return self._open_dir(key)  # raises OutsideRoot where a symlink leads out


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"
