"""systemd's readiness protocol (sd_notify), spoken directly: one ``KEY=VALUE`` datagram per
message (docs/configuration.md). It never fails a mount: a failed send is logged."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

__all__ = ["Notifier", "notify"]

log = logging.getLogger(__name__)


def _address(value: str) -> str | None:
    """The ``AF_UNIX`` address ``NOTIFY_SOCKET`` names; None for kinds we do not speak."""
    if value.startswith("@"):
        return "\0" + value[1:]  # abstract namespace
    if value.startswith("/"):
        return value
    return None  # "vsock:..." (VMs): not needed for a FUSE daemon


def notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (``"READY=1"``, ``"STATUS=..."``...) to systemd; whether it was sent."""
    value = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not value:
        return False
    address = _address(value)
    if address is None:
        log.warning("NOTIFY_SOCKET=%s: unsupported address; not notifying systemd", value)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError as e:
        log.warning("cannot notify systemd at %s: %s", value, e.strerror or e)
        return False
    return True


class Notifier:
    """The messages one mount sends: READY=1 once, then STOPPING=1 once, in that order."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._ready = False
        self._stopping = False

    def ready(self, status: str) -> None:
        """The mount is live: ``READY=1`` with a human-readable ``STATUS=``."""
        if not self._ready and not self._stopping:
            self._ready = True
            notify(f"READY=1\nSTATUS={_one_line(status)}\nMAINPID={os.getpid()}", self._environ)

    def stopping(self, status: str) -> None:
        """The mount is going away: ``STOPPING=1``."""
        if not self._stopping:
            self._stopping = True
            notify(f"STOPPING=1\nSTATUS={_one_line(status)}", self._environ)


def _one_line(text: str) -> str:
    return " ".join(text.split())
