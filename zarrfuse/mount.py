"""Mount lifecycle: open the source, build the filesystem, run pyfuse3 under trio, unmount."""

from __future__ import annotations

from collections.abc import Callable

from zarrfuse.config import MountConfig

__all__ = ["serve"]


def serve(config: MountConfig, on_ready: Callable[[], None] | None = None) -> None:
    """Mount ``config.source`` at ``config.mountpoint`` and serve until unmounted.

    Raises SourceError or ConfigurationError (bad source) or MountError (bad mountpoint)
    before anything is mounted. Calls ``on_ready()`` once the mount is live. Returns after a
    clean unmount: ``fusermount3 -u``, SIGINT or SIGTERM.
    """
    raise NotImplementedError("being written")
