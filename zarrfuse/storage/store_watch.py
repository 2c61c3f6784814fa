"""The keys other programs change in a local store, as the kernel reports them (inotify).

A mount keeps what it learnt of a store (listings, open chunks, renderings, decoded tiles,
and the kernel's own page cache) for as long as it may: forever on a read-only mount. A
chunk rewritten by zarr-python or by another mount would then stay old in this one. So a
mount of a local store watches it (``watchfiles``: inotify, one watch per directory) and is
told which keys changed, about ``DEBOUNCE_MS`` after they did; it never lists the store to
find out. Changes are delivered to the trio loop; the watching thread ends with the mount.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import trio

__all__ = ["DEBOUNCE_MS", "follow_store"]

log = logging.getLogger(__name__)

DEBOUNCE_MS = 100
"""Changes are gathered this long before they are delivered: a chunk written as several
events (create, write, close) is seen once."""
STOP_CHECK_MS = 200
"""How often the watching thread looks whether the mount has ended: it is joined before
the mount's loop returns (a thread still inside watchfiles' native code when the
interpreter exits can crash it: seen as SIGSEGV at exit with watchfiles 1.0)."""


def _keys(root: str, paths: Iterable[str]) -> set[str]:
    """Store keys (``/``-separated, relative to ``root``) of changed paths inside it."""
    keys = set()
    for path in paths:
        relative = os.path.relpath(path, root)
        if relative != "." and not relative.startswith(".." + os.sep) and relative != "..":
            keys.add(relative.replace(os.sep, "/"))
    return keys


async def follow_store(root: Path, apply: Callable[[set[str]], Awaitable[None]]) -> None:
    """Call ``apply(keys)`` with the keys changed under ``root``, until cancelled. If the
    store cannot be watched (no inotify, too many directories for the kernel's limit), one
    line says so and the mount goes on with its caches' time limits."""
    import watchfiles  # noqa: PLC0415  (a mount extra: imported by mounts only)

    stop = threading.Event()
    send, receive = trio.open_memory_channel[set[str]](math.inf)
    token = trio.lowlevel.current_trio_token()
    where = os.path.realpath(root)

    def deliver(keys: set[str]) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            send.send_nowait(keys)  # after the mount's end: nobody to tell

    def watch() -> None:
        try:
            for changes in watchfiles.watch(
                where, watch_filter=None, debounce=DEBOUNCE_MS, step=50, stop_event=stop,
                rust_timeout=STOP_CHECK_MS, raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                keys = _keys(where, (path for _, path in changes))
                if keys:
                    trio.from_thread.run_sync(deliver, keys, trio_token=token)
        except trio.RunFinishedError:
            return
        except Exception as e:  # noqa: BLE001  (notify's errors: limits, permissions)
            log.warning("not following changes other programs make to %s: %s; the mount "
                        "sees them after --metadata-ttl", root, e)
        with contextlib.suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(send.close, trio_token=token)

    thread = threading.Thread(target=watch, name="zarrfuse-store-watch", daemon=True)
    thread.start()
    log.debug("following changes to %s", where)
    try:
        async with receive:
            async for keys in receive:
                try:
                    await apply(keys)
                except Exception:  # a change it cannot apply must not end the mount
                    log.exception("applying changes to %s failed; the mount sees them "
                                  "after --metadata-ttl", root)
    finally:
        stop.set()
        with trio.CancelScope(shield=True):  # at unmount: a blink; the loop stays free
            await trio.to_thread.run_sync(thread.join, 10 * STOP_CHECK_MS / 1000)
