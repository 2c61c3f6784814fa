"""The readiness pipe between ``zarrfuse mount`` and the daemon it starts.

The daemon writes ``note: ...`` lines (things the user should read, printed by the parent as
they come), then one report line: ``ok`` once the mount is live, or ``error: REASON``. The
parent waits for the report with a deadline; the daemon's log is elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time

__all__ = ["ReadyPipe", "print_note", "read_report"]


def _one_line(message: str) -> bytes:
    return " ".join(message.split()).encode("utf-8", "replace")


def print_note(message: str) -> None:
    print(f"zarrfuse: {message}", file=sys.stderr, flush=True)


class ReadyPipe:
    """The child's end of the readiness pipe: write one line, then close."""

    def __init__(self, fd: int) -> None:
        # Not inherited by anything the child spawns (libfuse may run fusermount3, which
        # with auto_unmount stays alive): a copy held open would keep the parent from EOF.
        os.set_inheritable(fd, False)
        self._fd: int | None = fd

    @property
    def pending(self) -> bool:
        """Whether nothing has been reported yet."""
        return self._fd is not None

    def ready(self) -> None:
        """The ``on_ready`` callback: tell the parent the mount is live."""
        self._send(b"ok\n")

    def note(self, message: str) -> None:
        """Something the parent prints (what a group's view leaves out) before the report."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._fd, b"note: " + _one_line(message) + b"\n")

    def fail(self, message: str) -> None:
        """Tell the parent why the mount failed."""
        self._send(b"error: " + _one_line(message) + b"\n")

    def _send(self, line: bytes) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.write(fd, line)
        except OSError:
            pass  # the parent is gone (it gave up); nobody is left to tell
        finally:
            os.close(fd)


def read_report(fd: int, deadline: float) -> bytes | None:
    """The child's report line (b"" if it closed the pipe without one); None on timeout.
    Its ``note:`` lines before it are printed as they come."""
    data = b""
    while True:
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return data
            data += chunk
        line, _, data = data.partition(b"\n")
        if not line.startswith(b"note: "):
            return line
        print_note(line.removeprefix(b"note: ").decode("utf-8", "replace"))
