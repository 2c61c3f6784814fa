"""The keys other programs change in a local store, as the kernel reports them (inotify via
``watchfiles``, about ``DEBOUNCE_MS`` after the change), so a mount that keeps what it learnt
forgets what changed; while the watch runs (``WatchState``) a writable mount may keep its
caches as long as a read-only one does.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import trio

__all__ = ["DEBOUNCE_MS", "WHOLE_DIRECTORY", "WatchState", "follow_store"]

log = logging.getLogger(__name__)

WHOLE_DIRECTORY = "/"
"""Ends the key of a directory that appeared: everything in it may be new."""
WALKED_AT_MOST = 10_000
"""Files of a directory that appeared reported one by one; past them, the directory's key
(``WHOLE_DIRECTORY``) makes the mount list its arrays again."""
DEBOUNCE_MS = 100
"""Changes are gathered this long, so a chunk written as several events is seen once."""
STOP_CHECK_MS = 50
"""How often the watching thread looks whether the mount has ended: it is joined before
the loop returns (a thread inside watchfiles' native code at interpreter exit crashed it:
SIGSEGV with watchfiles 1.0). Also when its first round comes (``WatchState``)."""
STOP_WAIT = 2.0
"""Seconds the mount's end waits for the watching thread (a few rounds)."""


class WatchState:
    """Whether a store's watch runs: ``live`` from its first round until it fails or the
    mount ends (then ``ended`` listeners run once, in the trio thread). What a mount learnt
    before the first round is trusted only ``settle`` seconds; ``set_up`` is set at the
    first round, or when the watch ends before it."""

    def __init__(self, settle: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.settle = settle
        self.clock = clock  # the mount's TTL clock (``Trust.clock``)
        self.live = False
        self.set_up = trio.Event()
        self._serving = False
        self._from_start = False
        self._watched_since: float | None = None
        self._ended: list[Callable[[], Awaitable[None]]] = []
        self._done = False

    def serving(self) -> None:
        """The mount starts answering requests: what it learns may now precede the watch."""
        self._serving = True

    def first_round(self) -> float:
        """The watch is set up; how long it must still run before it counts (``started``)."""
        self.set_up.set()
        self._from_start = not self._serving
        self._watched_since = self.clock()
        return self.settle if self._serving else 0.0

    def tells_all(self, at: float) -> bool:
        """Whether every change since ``at`` (monotonic: when the mount learnt something)
        has been or will be told: the watch is live and was set up before the mount's first
        request, or by ``at``. Else what was learnt keeps its TTL."""
        if not self.live:
            return False
        return self._from_start or (self._watched_since is not None
                                    and at >= self._watched_since)

    def when_ended(self, listener: Callable[[], Awaitable[None]]) -> None:
        self._ended.append(listener)

    def started(self) -> None:
        if not self._done:
            self.live = True

    async def end(self) -> None:
        """The watch stopped: whatever relied on it must drop what it kept."""
        was_live, self.live = self.live, False
        self.set_up.set()
        if self._done:
            return
        self._done = True
        if was_live:
            for listener in self._ended:
                await listener()


def _keys(root: str, changes: Iterable[tuple[object, str]], added: object) -> set[str]:
    """Store keys (relative to ``root``) of changed paths inside it. A directory that
    appeared has its files reported too (written before the watch saw it: zarr-python makes
    ``c/0/`` and ``c/0/9`` at once), or past ``WALKED_AT_MOST`` its key ending in
    ``WHOLE_DIRECTORY``. A symlink is never followed out."""
    keys = set()
    for change, path in changes:
        relative = os.path.relpath(path, root)
        if relative != "." and not relative.startswith(".." + os.sep) and relative != "..":
            key = _key_of(relative)
            keys.add(key)
            if change == added and os.path.isdir(path) and not os.path.islink(path):
                files = _files_below(root, path)
                keys.update(files)
                if len(files) > WALKED_AT_MOST:
                    keys.add(key + WHOLE_DIRECTORY)
    return keys


def _files_below(root: str, directory: str) -> list[str]:
    """The keys of the files in a directory that appeared, up to one more than
    ``WALKED_AT_MOST`` (more: the walk stopped there)."""
    found: list[str] = []
    for where, _dirs, files in os.walk(directory):
        for name in files:
            found.append(_key_of(os.path.relpath(os.path.join(where, name), root)))
            if len(found) > WALKED_AT_MOST:
                return found
    return found


def _key_of(relative: str) -> str:
    """The store key of a path relative to the store's root."""
    return relative.replace(os.sep, "/")


async def follow_store(
    root: Path, apply: Callable[[set[str]], Awaitable[None]], state: WatchState | None = None
) -> None:
    """Call ``apply(keys)`` with the keys changed under ``root``, until cancelled; ``state``
    follows whether the watch runs. A store that cannot be watched is said in one line, and
    the mount keeps its caches' time limits."""
    import watchfiles  # noqa: PLC0415  (a mount extra: imported by mounts only)

    stop = threading.Event()
    send, receive = trio.open_memory_channel[set[str]](math.inf)
    token = trio.lowlevel.current_trio_token()
    where = os.path.realpath(root)

    def live() -> None:
        log.debug("watching %s for changes other programs make", root)
        if state is not None:
            state.started()

    def deliver(keys: set[str]) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            send.send_nowait(keys)  # after the mount's end: nobody to tell

    def watch() -> None:
        watched_since, told, settle = None, False, 0.0
        clock = time.monotonic if state is None else state.clock
        try:
            # Every round yields, changes or not: the first says every directory is watched.
            for changes in watchfiles.watch(
                where, watch_filter=None, debounce=DEBOUNCE_MS, step=50, stop_event=stop,
                rust_timeout=STOP_CHECK_MS, yield_on_timeout=True, raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                if watched_since is None:
                    watched_since = clock()
                    if state is not None:
                        settle = trio.from_thread.run_sync(state.first_round, trio_token=token)
                if not told and clock() - watched_since >= settle:
                    told = True
                    trio.from_thread.run_sync(live, trio_token=token)
                keys = _keys(where, changes, watchfiles.Change.added)
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
    try:
        async with receive:
            async for keys in receive:
                try:
                    await apply(keys)
                except Exception:  # a change it cannot apply must not end the mount
                    log.exception("applying changes to %s failed; the mount sees them "
                                  "after --metadata-ttl", root)
                    if state is not None:  # what it keeps may be old: trust it no longer
                        await state.end()
        if state is not None:  # the watch failed (the mount goes on): no longer told
            await state.end()
    finally:
        if state is not None:
            state.live = False
        stop.set()
        with trio.CancelScope(shield=True):  # at unmount: a blink; the loop stays free
            await trio.to_thread.run_sync(thread.join, STOP_WAIT)
