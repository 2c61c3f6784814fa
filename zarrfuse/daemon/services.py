"""What runs beside a served mount (the stats socket, sd_notify), handed to ``fuse.mount.serve``
so the lifecycle imports nothing above itself."""

from __future__ import annotations

from typing import Any

import trio

from zarrfuse.daemon import control, notify
from zarrfuse.fuse.mount import MountInfo

__all__ = ["OperatingServices"]


class OperatingServices:
    """The stats socket and READY=1 / STOPPING=1 to systemd (if it asked) for one mount."""

    def __init__(self) -> None:
        self._notifier = notify.Notifier()
        self._server: control.ControlServer | None = None

    def built(self, info: MountInfo) -> None:
        self._server = control.ControlServer(
            info.mountpoint,
            control.describe_mount(
                source=info.source, mountpoint=info.mountpoint, kind=info.kind,
                read_only=info.read_only, counters=info.counters, started=info.started,
                watching=info.watching,
            ),
        )

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        if self._server is None:
            task_status.started()
            return
        await self._server.serve(task_status=task_status)

    def ready(self, message: str) -> None:
        self._notifier.ready(message)

    def stopping(self, message: str) -> None:
        self._notifier.stopping(message)
