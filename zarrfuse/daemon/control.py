"""The control socket: a mount's counters and recent log lines, one JSON document per
connection, for ``zarrfuse stats`` and ``zarrfuse log``. Why: docs/mounting.md, "The control
socket"."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import stat
import time
from collections.abc import Callable
from typing import Any

import trio

from zarrfuse import __version__
from zarrfuse.daemon import mount_log
from zarrfuse.errors import MountError

__all__ = [
    "ControlServer",
    "canonical_mountpoint",
    "describe_mount",
    "format_stats",
    "request_stats",
    "socket_dirs",
    "socket_name",
]

log = logging.getLogger(__name__)

SEND_TIMEOUT = 5.0
"""Seconds a client gets to take the document before the daemon drops it."""
CLIENT_TIMEOUT = 10.0
"""Seconds ``zarrfuse stats`` waits for the daemon."""
_MAX_SUN_PATH = 107  # sockaddr_un.sun_path is 108 bytes with the trailing NUL


def canonical_mountpoint(path: str) -> str:
    """``path`` absolute and symlink-free, resolving only its parent (a stat of a stuck
    mount never returns)."""
    head, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(head), name)


def socket_name(mountpoint: str) -> str:
    """The socket's file name for a (canonical) mountpoint."""
    digest = hashlib.sha256(os.fsencode(mountpoint)).hexdigest()[:16]
    return f"{digest}.sock"


def socket_dirs(uid: int | None = None, environ: dict[str, str] | None = None) -> list[str]:
    """The directories a daemon running as ``uid`` may use, most preferred first."""
    uid = os.getuid() if uid is None else uid
    environ = dict(os.environ) if environ is None else environ
    if uid == 0:
        return ["/run/zarrfuse"]
    dirs = []
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            st = os.stat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid:
                dirs.append(os.path.join(runtime, "zarrfuse"))
        except OSError:
            pass
    dirs.append(f"/tmp/zarrfuse-{uid}")
    return dirs


def _private_dir(path: str) -> None:
    """Make ``path`` a directory only we can enter; refuse one that is not ours."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise MountError(f"{path} is not a directory")
    if st.st_uid != os.geteuid():
        raise MountError(f"{path} belongs to uid {st.st_uid}, not to us")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)


def mount_owner(mountpoint: str) -> int | None:
    """The uid that made the FUSE mount at ``mountpoint`` (its ``user_id=``), or None."""
    owner = None
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:  # the last entry for a path is the one visible there
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)
            where = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
            if os.fsdecode(where) != mountpoint:
                continue
            options = fields[sep + 3].split(b",")
        except (ValueError, IndexError):
            continue
        ids = [o[len(b"user_id=") :] for o in options if o.startswith(b"user_id=")]
        owner = int(ids[0]) if ids and ids[0].isdigit() else None
    return owner


def _client_candidates(mountpoint: str) -> list[tuple[str, int | None]]:
    """(socket path, uid that must own it) to try for ``mountpoint``: our own directories;
    root also the directories of the user who made the mount (mountinfo's ``user_id=``)."""
    name = socket_name(mountpoint)
    found: list[tuple[str, int | None]] = [(os.path.join(d, name), None) for d in socket_dirs()]
    owner = mount_owner(mountpoint)
    if os.getuid() == 0 and owner not in (None, 0):
        for directory in (f"/run/user/{owner}/zarrfuse", f"/tmp/zarrfuse-{owner}"):
            found.append((os.path.join(directory, name), owner))
    return found


class ControlServer:
    """Serves ``describe()`` as JSON on the mount's control socket while the mount lives."""

    def __init__(self, mountpoint: str, describe: Callable[[], dict[str, Any]]) -> None:
        self.mountpoint = canonical_mountpoint(mountpoint)
        self._describe = describe
        self.path: str | None = None

    def _bind(self) -> tuple[socket.socket, str, int]:
        """A listening socket at its final path; (socket, path, inode). Blocking."""
        errors = []
        for directory in socket_dirs():
            path = os.path.join(directory, socket_name(self.mountpoint))
            if len(os.fsencode(path)) > _MAX_SUN_PATH:
                errors.append(f"{path}: path too long for a unix socket")
                continue
            temp = f"{path}.{os.getpid()}.tmp"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                _private_dir(directory)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
                sock.bind(temp)
                os.chmod(temp, 0o600)
                sock.listen(16)
                os.rename(temp, path)  # atomically replaces a stale socket of a killed daemon
                return sock, path, os.stat(path).st_ino
            except (OSError, MountError) as e:
                sock.close()
                errors.append(str(e))
        raise MountError("no usable directory for the control socket: " + "; ".join(errors))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled, then remove the socket. Started with ``nursery.start``."""
        try:
            sock, path, inode = await trio.to_thread.run_sync(self._bind)
        except Exception as e:  # noqa: BLE001  (stats are a convenience; the mount goes on)
            log.warning("no control socket, zarrfuse stats will not work: %s", e)
            task_status.started()
            return
        self.path = path
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        log.debug("control socket %s", path)
        try:
            async with listener:
                task_status.started()
                while True:
                    try:
                        stream = await listener.accept()
                    except OSError as e:  # EMFILE and friends: wait, do not die
                        log.warning("control socket: accept failed: %s", e)
                        await trio.sleep(0.5)
                        continue
                    await self._answer(stream)
        finally:
            _remove_if_ours(path, inode)
            self.path = None

    async def _answer(self, stream: trio.SocketStream) -> None:
        """Send one document and close; never raise (a failure here must not end the mount)."""
        try:
            payload = (json.dumps(self._describe(), sort_keys=True) + "\n").encode()
            with trio.move_on_after(SEND_TIMEOUT):
                await stream.send_all(payload)
        except Exception as e:  # noqa: BLE001  (a failed answer must not end the mount)
            log.debug("control socket: client went away: %s", e)
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except Exception as e:  # noqa: BLE001  (a client gone away: nothing to tell it)
                    log.debug("control socket: closing: %s", e)


def _remove_if_ours(path: str, inode: int) -> None:
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def describe_mount(
    *, source: str, mountpoint: str, kind: str, read_only: bool, counters: Any, started: float,
    watching: Callable[[], bool] | None = None,
) -> Callable[[], dict[str, Any]]:
    """The ``describe`` callable of a mount: what it is, and its counters now.
    ``watching``: whether its store watch runs (None: the store is not watched)."""

    def describe() -> dict[str, Any]:
        return {
            "zarrfuse": __version__,
            "pid": os.getpid(),
            "source": source,
            "mountpoint": canonical_mountpoint(mountpoint),
            "kind": kind,
            "read_only": read_only,
            "started": started,
            "uptime_s": round(time.time() - started, 3),
            "watching": None if watching is None else watching(),
            "counters": counters.snapshot(),
            "log_to": mount_log.DESTINATION.text,
            "log": mount_log.RECENT.lines(),
        }

    return describe


# --- the client -------------------------------------------------------------------------------


def _fetch(path: str) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(CLIENT_TIMEOUT)
        sock.connect(path)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document


def request_stats(mountpoint: str) -> dict[str, Any]:
    """The document of the daemon serving ``mountpoint``; MountError saying why if none."""
    where = canonical_mountpoint(mountpoint)
    stale = []
    for path, owner in _client_candidates(where):
        try:
            if owner is not None and os.lstat(path).st_uid != owner:
                continue  # not the mount owner's socket: do not believe it
            document = _fetch(path)
        except FileNotFoundError:
            continue
        except PermissionError:
            stale.append(f"{path}: permission denied (the mount belongs to another user)")
            continue
        except ConnectionRefusedError:
            stale.append(f"{path}: nobody listens (its daemon was killed?)")
            continue
        except (OSError, ValueError) as e:
            raise MountError(f"{where}: the daemon's control socket {path} failed: {e}") from e
        if document.get("mountpoint") != where:
            continue  # another mount's socket (a hash collision): keep looking
        return document
    reason = "; ".join(stale) if stale else "no control socket found"
    if os.path.lexists(where) and not _listed(where):
        raise MountError(f"{where} is not mounted")
    raise MountError(f"{where}: not a zarrfuse mount this user can ask ({reason})")


def _listed(path: str) -> bool:
    from zarrfuse.fuse.mountpoint import is_mounted  # noqa: PLC0415

    return is_mounted(path)


# --- the table --------------------------------------------------------------------------------


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit} ({n})"
        size /= 1024
    raise AssertionError  # unreachable


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}d {text}" if days else text


def _watch_words(watching: bool | None) -> str:
    if watching is None:
        return ""
    return ", following the store" if watching else ", not following the store"


def format_stats(document: dict[str, Any]) -> str:
    """``zarrfuse stats``'s readable table of a daemon's document."""
    c = document.get("counters", {})
    mode = "read-only" if document.get("read_only") else "writable"
    lines = [
        f"{document.get('mountpoint')}: {document.get('kind', 'node')} {document.get('source')}"
        f" ({mode}), pid {document.get('pid')}, up {_duration(document.get('uptime_s', 0))}"
        + _watch_words(document.get("watching")),
    ]

    def section(title: str, counts: dict[str, int]) -> None:
        lines.append(f"{title:<28}{sum(counts.values()):>14}")
        for name, value in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {name:<26}{value:>14}")

    section("requests", c.get("requests", {}))
    seconds = c.get("request_seconds", {})
    if seconds:
        lines.append("mean time per request (ms)")
        for name, total in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0])):
            count = c.get("requests", {}).get(name, 0)
            if count:
                lines.append(f"  {name:<26}{1000 * total / count:>14.3f}")
    section("errors", c.get("errors", {}))
    section("store requests", c.get("store_requests", {}))
    section("cache", c.get("cache", {}))
    lines.append("bytes")
    for label, key in (
        ("read through the mount", "bytes_read"),
        ("written through the mount", "bytes_written"),
        ("fetched from the store", "store_bytes_read"),
        ("stored", "store_bytes_written"),
    ):
        lines.append(f"  {label:<26}{_bytes(int(c.get(key, 0))):>14}")
    return "\n".join(lines) + "\n"

