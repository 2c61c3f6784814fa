"""Where a mount's log goes (docs/troubleshooting.md, "Where is the log?"), and its last
``RECENT_LINES`` lines kept in memory for ``zarrfuse log``."""

from __future__ import annotations

import collections
import hashlib
import logging
import logging.handlers
import os
import re
import stat
import threading

__all__ = [
    "DESTINATION",
    "RECENT",
    "RECENT_LINES",
    "ROTATE_BYTES",
    "AbandonedReplies",
    "RecentLines",
    "default_log_file",
    "prepare_log_file",
    "rotating_file_handler",
    "syslog_address",
    "syslog_handler",
]

RECENT_LINES = 500
ROTATE_BYTES = 10 << 20
SYSLOG_SOCKET = "/dev/log"


class AbandonedReplies(logging.Filter):
    """For the ``pyfuse3`` logger: its ERROR "fuse_reply_* failed with No such file or
    directory" is a reply the kernel no longer waited for (an interrupted request); DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "fuse_reply_* failed" not in message or "No such file or directory" not in message:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


class RecentLines(logging.Handler):
    """The last log lines, formatted, for ``zarrfuse log``."""

    def __init__(self, capacity: int = RECENT_LINES) -> None:
        super().__init__()
        self._lines: collections.deque[str] = collections.deque(maxlen=capacity)
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001  (a bad record must not break logging)
            self.handleError(record)
            return
        with self._guard:
            self._lines.append(text)

    def lines(self) -> list[str]:
        with self._guard:
            return list(self._lines)


RECENT = RecentLines()
"""The daemon's one buffer of recent lines (installed by ``configure_logging``)."""


class _Destination:
    """Where this process's log goes, in words (``zarrfuse log`` says it)."""

    text = "stderr"


DESTINATION = _Destination()


def syslog_address(path: str = SYSLOG_SOCKET) -> str | None:
    """The syslog socket when one is listening there (a unix socket), else None."""
    try:
        return path if stat.S_ISSOCK(os.stat(path).st_mode) else None
    except OSError:
        return None


def syslog_handler(address: str) -> logging.Handler:
    """A handler writing to syslog as ``zarrfuse[PID]``, facility daemon."""
    handler = logging.handlers.SysLogHandler(
        address=address, facility=logging.handlers.SysLogHandler.LOG_DAEMON
    )
    handler.ident = f"zarrfuse[{os.getpid()}]: "
    return handler


def _file_name(mountpoint: str) -> str:
    """The mountpoint as a file name a person recognises, unique by a short hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", mountpoint.strip("/"))[-80:].strip("-.")
    digest = hashlib.sha256(os.fsencode(mountpoint)).hexdigest()[:8]
    return f"{readable or 'root'}-{digest}.log"


def default_log_file(
    mountpoint: str, uid: int | None = None, environ: dict[str, str] | None = None
) -> str:
    """The log file of a background mount at ``mountpoint`` when there is no syslog."""
    uid = os.getuid() if uid is None else uid
    env = os.environ if environ is None else environ
    if uid == 0:
        base = "/var/log/zarrfuse"
    else:
        state = env.get("XDG_STATE_HOME") or os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".local", "state"
        )
        base = os.path.join(state, "zarrfuse", "log")
    return os.path.join(base, _file_name(mountpoint))


def prepare_log_file(path: str) -> None:
    """Create the default log file (mode 0600, in a 0700 directory) if it is not there."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.close(fd)


def rotating_file_handler(path: str) -> logging.Handler:
    """The default log file, kept to ``ROTATE_BYTES`` and one older file (``.1``)."""
    prepare_log_file(path)
    return logging.handlers.RotatingFileHandler(
        path, maxBytes=ROTATE_BYTES, backupCount=1, encoding="utf-8", errors="backslashreplace"
    )
