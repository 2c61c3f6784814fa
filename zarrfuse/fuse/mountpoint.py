"""Mountpoints: check one before mounting, tell whether one is mounted, unmount one; none of
these can hang on a dead or stuck mount (docs/mounting.md, "Dead and stuck mounts")."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from zarrfuse.errors import MountError
from zarrfuse.fuse.handed_fd import handed_fuse_fd

__all__ = [
    "MountEntry",
    "hidden_entries",
    "holders",
    "is_mounted",
    "mount_entry",
    "prepare_mountpoint",
    "unmount",
    "unmount_or_detach",
]

MOUNTINFO = "/proc/self/mountinfo"
COMMAND_TIMEOUT = 10.0
"""Seconds an unmount command may take; umount of a stuck FUSE mount can block forever."""
STAT_TIMEOUT = 10.0
"""Seconds a stat of a mountpoint may take before its daemon is called stuck."""
_DEAD_ERRNOS = frozenset({errno.ENOTCONN, errno.ECONNABORTED})
_MAX_STACKED_DEAD = 8

State = Literal["live", "dead", "stuck"]
T = TypeVar("T")


@dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``: where, what kind (``fuse``, ``ext4``…), from what."""

    mountpoint: str
    fstype: str
    source: str
    options: str = ""
    """The file system's own options (``rw,user_id=1000,...``)."""


def _unescape(field: bytes) -> str:
    r"""A mountinfo path field as a str: the kernel writes space, tab, newline, \ as \ooo."""
    out = bytearray()
    i = 0
    while i < len(field):
        octal = field[i + 1 : i + 4]
        if field[i] == ord("\\") and len(octal) == 3 and all(48 <= c <= 55 for c in octal):
            out.append(int(octal, 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return os.fsdecode(bytes(out))


def mount_entries() -> list[MountEntry]:
    """Every mount this process sees, in mount order (a later entry hides an earlier one)."""
    with open(MOUNTINFO, "rb") as f:
        lines = f.read().splitlines()
    entries = []
    for line in lines:
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)  # optional fields end with a lone "-"
            where, fstype, source = fields[4], fields[sep + 1], fields[sep + 2]
            options = fields[sep + 3] if len(fields) > sep + 3 else b""
            entries.append(MountEntry(_unescape(where), _unescape(fstype), _unescape(source),
                                      _unescape(options)))
        except (ValueError, IndexError):
            continue
    return entries


def _canonical(path: str, mountpoints: set[str]) -> str:
    """The absolute, symlink-free form of ``path`` as mountinfo would spell it; the parent
    is resolved first, so a mountpoint itself is never stat'ed (a stuck one would block)."""
    path = os.path.abspath(path)
    head, name = os.path.split(path)
    candidate = os.path.join(os.path.realpath(head), name)
    if candidate in mountpoints:
        return candidate
    return os.path.realpath(path)  # the last component may be a symlink to a mountpoint


def mount_entry(path: str) -> MountEntry | None:
    """The mount visible at ``path`` (the topmost one if several are stacked), or None."""
    entries = mount_entries()
    where = _canonical(path, {e.mountpoint for e in entries})
    found = [e for e in entries if e.mountpoint == where]
    return found[-1] if found else None


def is_mounted(path: str) -> bool:
    """Whether something, live or dead, is mounted exactly at ``path``."""
    return mount_entry(path) is not None


def _timed(probe: Callable[[str], T], path: str, timeout: float = STAT_TIMEOUT) -> T:
    """``probe(path)`` in a thread abandoned after ``timeout``: its OSError, or MountError."""
    result: list[T | OSError] = []

    def run() -> None:
        try:
            result.append(probe(path))
        except OSError as e:
            result.append(e)

    thread = threading.Thread(target=run, name="zarrfuse-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if not result:
        raise MountError(
            f"{path} does not answer within {timeout:g} s (a stuck FUSE daemon?); "
            f"try: zarrfuse umount {path}"
        )
    if isinstance(result[0], OSError):
        raise result[0]
    return result[0]


def _state(path: str) -> State:
    """Whether the mount at ``path`` answers, is dead (ENOTCONN), or is stuck. statvfs, not
    stat: the kernel answers stat from its cache, statfs always reaches the daemon."""
    try:
        _timed(os.statvfs, path)
    except MountError:
        return "stuck"
    except OSError as e:
        return "dead" if e.errno in _DEAD_ERRNOS else "live"
    return "live"


def _run(cmd: list[str], timeout: float = COMMAND_TIMEOUT) -> tuple[int | None, str]:
    """Run ``cmd``; its exit status (None if it timed out or is missing) and its stderr."""
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as e:
        return None, f"{cmd[0]}: {e.strerror}"
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        # Blocked in the kernel even after SIGKILL: abandon it rather than hang.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=2)
        return None, f"{' '.join(cmd)} did not finish within {timeout:g} s"
    return proc.returncode, " ".join(err.split())


def unmount(path: str, lazy: bool = False) -> None:
    """Unmount the FUSE mount at ``path`` with ``fusermount3 -u`` (``-z``: lazily, even if
    busy or dead; then ``umount -l`` if that fails); MountError with fusermount3's message."""
    status, message = _run(["fusermount3", "-u", *(["-z"] if lazy else []), path])
    if status == 0:
        return
    if lazy and _run(["umount", "-l", path])[0] == 0:
        return
    raise MountError(message or f"fusermount3 -u {path} failed with status {status}")


def unmount_or_detach(path: str) -> str | None:
    """Unmount the FUSE mount at ``path``, lazily if dead, stuck or busy (then: why). Raises
    MountError for no mount or one not FUSE (fusermount3 as root unmounts anything)."""
    path = os.path.abspath(path)
    entry = mount_entry(path)
    if entry is None:
        if not os.path.lexists(path):
            raise MountError(f"{path} does not exist")
        raise MountError(f"{path} is not mounted")
    if not entry.fstype.startswith("fuse"):
        raise MountError(f"{path} is a {entry.fstype} mount, not a FUSE mount; not unmounting it")
    state = _state(path)
    if state != "live":
        unmount(path, lazy=True)
        return state
    try:
        unmount(path)
        return None
    except MountError:
        if mount_entry(path) != entry:
            return None
    held = ", ".join(holders(path))  # before the detach, which hides their paths
    unmount(path, lazy=True)  # busy: "Device or resource busy"
    return f"busy, held by {held}" if held else "busy"


def holders(path: str) -> list[str]:
    """``PID N (COMMAND)`` of each process using a path at or under ``path`` (what keeps an
    unmount busy), from /proc alone: safe on a dead mount."""
    below = path.rstrip("/") + "/"
    found = []
    for pid in sorted(filter(str.isdigit, os.listdir("/proc")), key=int):
        proc = f"/proc/{pid}"
        names = [f"{proc}/cwd", f"{proc}/root"]
        with contextlib.suppress(OSError):
            names += [f"{proc}/fd/{fd}" for fd in os.listdir(f"{proc}/fd")]
        used = []
        for name in names:
            with contextlib.suppress(OSError):
                used.append(os.readlink(name))
        with contextlib.suppress(OSError), open(f"{proc}/maps", encoding="utf-8",
                                                errors="replace") as maps:
            used += [line.split(maxsplit=5)[-1].rstrip("\n") for line in maps]
        if int(pid) != os.getpid() and any(u == path or u.startswith(below) for u in used):
            with contextlib.suppress(OSError), open(f"{proc}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").strip().decode(errors="replace")
                found.append(f"PID {pid} ({command[:80] or '?'})")
    return found


def _detach_dead_mounts(path: str) -> None:
    """Detach dead mounts at ``path``; refuse a live or stuck one."""
    for _ in range(_MAX_STACKED_DEAD):
        entry = mount_entry(path)
        if entry is None:
            return
        state = _state(path)
        if state == "live":
            raise MountError(f"{path} is already mounted ({entry.fstype} from {entry.source})")
        if state == "stuck":
            raise MountError(
                f"{path} is already mounted and does not answer (a stuck FUSE daemon?); "
                f"try: zarrfuse umount {path}"
            )
        unmount(path, lazy=True)
    raise MountError(f"{path}: cannot remove the dead mounts stacked there")


def prepare_mountpoint(path: str) -> None:
    """Check that ``path`` is an existing directory with nothing live mounted (a dead mount
    is detached); MountError saying what is wrong otherwise."""
    if handed_fuse_fd(path) is not None:  # mounted already, by whoever handed it on
        return
    path = os.path.abspath(path)
    _detach_dead_mounts(path)
    try:
        st = _timed(os.stat, path)
    except FileNotFoundError:
        raise MountError(f"mountpoint {path} does not exist") from None
    except OSError as e:
        raise MountError(f"mountpoint {path}: {e.strerror}") from e
    if not stat.S_ISDIR(st.st_mode):
        raise MountError(f"mountpoint {path} is not a directory")


def hidden_entries(path: str) -> int:
    """How many entries the folder ``path`` has, which a mount over it hides until unmount
    (0 for a descriptor handed on, or a folder that cannot be listed)."""
    if handed_fuse_fd(path) is not None:
        return 0
    try:
        with os.scandir(path) as entries:
            return sum(1 for _ in entries)
    except OSError:
        return 0
