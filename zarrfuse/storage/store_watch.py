"""The keys other programs change in a local store, as the kernel reports them (inotify, one
watch a directory, about ``DEBOUNCE_MS`` after the change), so a mount that keeps what it
learnt forgets what changed; while the watch runs (``WatchState``) a writable mount may keep
its caches as long as a read-only one does.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path

import trio
from inotify_simple import INotify, flags

__all__ = ["DEBOUNCE_MS", "WHOLE_DIRECTORY", "WatchState", "follow_store"]

log = logging.getLogger(__name__)

WHOLE_DIRECTORY = "/"
"""Ends the key of a directory that appeared: everything in it may be new."""
WALKED_AT_MOST = 10_000
"""Files of a directory that appeared reported one by one; past them, the directory's key
(``WHOLE_DIRECTORY``) makes the mount list its arrays again."""
DEBOUNCE_MS = 100
"""Changes are gathered this long at most, so a chunk written as several events is seen once."""
STOP_CHECK_MS = 50
"""A round: how long the watching thread waits for events before it yields what it gathered
(nothing, or a change with no event after it this long) and looks whether the mount has
ended; it is joined before the loop returns. Also when its first round comes
(``WatchState``)."""
CHANGES = (flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE | flags.MOVED_FROM | flags.MOVED_TO
           | flags.CREATE | flags.DELETE | flags.DELETE_SELF | flags.MOVE_SELF)
"""What a watch asks for: every change of an entry, never an open or a read. ``watchfiles``
(notify) also asks for IN_OPEN, and then each read of a chunk file (the mount's own
included) woke its thread: 4-6% of a cold pass over 2000 files (docs/performance.md)."""
ADDED, MODIFIED, DELETED, ALL_BELOW = "added", "modified", "deleted", "all below"
"""The change each event stands for, in a round's ``(change, path)`` pairs; ``ALL_BELOW``: a
directory appeared with more files than ``WALKED_AT_MOST``, for the mount to list again."""
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


def _keys(root: str, changes: Iterable[tuple[str, str]]) -> set[str]:
    """Store keys (relative to ``root``) of changed paths inside it; a directory that
    appeared with more files than the watch names (``ALL_BELOW``) ends in
    ``WHOLE_DIRECTORY``."""
    keys = set()
    for change, path in changes:
        relative = os.path.relpath(path, root)
        if relative not in (".", "..") and not relative.startswith(".." + os.sep):
            key = relative.replace(os.sep, "/")
            keys.add(key + WHOLE_DIRECTORY if change == ALL_BELOW else key)
    return keys


class _Watches:
    """One inotify watch per directory below the root (symlinks never followed), and the
    path each stands for."""

    def __init__(self, inotify: INotify) -> None:
        self._inotify = inotify
        self.paths: dict[int, str] = {}

    def add(self, top: str) -> list[str]:
        """Watch ``top`` and every directory below it, each before it is listed, so no file
        made meanwhile goes untold; the files found, up to one more than ``WALKED_AT_MOST``
        (a directory that appeared: zarr-python makes ``c/0/`` and ``c/0/9`` at once). A
        directory gone or refused is left; a symlink is never walked (``DONT_FOLLOW``), even
        one that took a new directory's place."""
        found: list[str] = []
        below = [top]
        while below:
            where = below.pop()
            try:
                wd = self._inotify.add_watch(where, CHANGES | flags.ONLYDIR | flags.DONT_FOLLOW)
                self.paths[wd] = where
                with os.scandir(where) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            below.append(entry.path)
                        elif len(found) <= WALKED_AT_MOST:
                            found.append(entry.path)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue  # gone, a symlink or a file now, or not ours to read
        return found

    def forget_below(self, top: str) -> None:
        """``top`` moved away: its watches would name paths that are no longer theirs."""
        for wd, path in list(self.paths.items()):
            if path == top or path.startswith(top + os.sep):
                del self.paths[wd]
                with contextlib.suppress(OSError):  # removed already
                    self._inotify.rm_watch(wd)


def _rounds(root: str, stop: threading.Event) -> Iterator[set[tuple[str, str]]]:
    """The (change, path) pairs under ``root``, a set a round (empty if nothing changed),
    until ``stop`` is set. OSError if the kernel cannot watch it all (no watches left, or its
    queue of events overflowed: changes were lost, so the watch ends)."""
    with INotify() as inotify:
        watches = _Watches(inotify)
        watches.add(root)
        gathered: set[tuple[str, str]] = set()
        since = 0.0
        while not stop.is_set():
            events = inotify.read(timeout=STOP_CHECK_MS)
            if events and not gathered:
                since = time.monotonic()
            for event in events:
                if event.mask & flags.Q_OVERFLOW:
                    raise OSError("the kernel's queue of changes overflowed")
                where = watches.paths.get(event.wd)
                if where is None:
                    continue  # a watch just forgotten
                if event.mask & flags.IGNORED:
                    del watches.paths[event.wd]
                    continue
                path = os.path.join(where, event.name) if event.name else where
                if event.mask & (flags.CREATE | flags.MOVED_TO):
                    gathered.add((ADDED, path))
                    if event.mask & flags.ISDIR:
                        files = watches.add(path)
                        gathered.update((ADDED, file) for file in files)
                        if len(files) > WALKED_AT_MOST:
                            gathered.add((ALL_BELOW, path))
                elif event.mask & (flags.DELETE | flags.MOVED_FROM | flags.DELETE_SELF
                                   | flags.MOVE_SELF):
                    gathered.add((DELETED, path))
                    if event.mask & flags.ISDIR and event.mask & flags.MOVED_FROM:
                        watches.forget_below(path)
                else:
                    gathered.add((MODIFIED, path))
            if not events or not gathered or time.monotonic() - since >= DEBOUNCE_MS / 1000:
                yield gathered
                gathered = set()


async def follow_store(
    root: Path, apply: Callable[[set[str]], Awaitable[None]], state: WatchState | None = None
) -> None:
    """Call ``apply(keys)`` with the keys changed under ``root``, until cancelled; ``state``
    follows whether the watch runs. A store that cannot be watched is said in one line, and
    the mount keeps its caches' time limits."""
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
            for changes in _rounds(where, stop):
                if watched_since is None:
                    watched_since = clock()
                    if state is not None:
                        settle = trio.from_thread.run_sync(state.first_round, trio_token=token)
                if not told and clock() - watched_since >= settle:
                    told = True
                    trio.from_thread.run_sync(live, trio_token=token)
                keys = _keys(where, changes)
                if keys:
                    trio.from_thread.run_sync(deliver, keys, trio_token=token)
        except trio.RunFinishedError:
            return
        except Exception as e:  # noqa: BLE001  (inotify's limits, an overflow)
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
