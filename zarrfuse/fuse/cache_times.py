"""How long the kernel and the mount keep what they learnt of a store: a read-only mount's
life; a writable one's briefly, or as long while its store watch tells every change."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from zarrfuse.filesystem.chunks.chunk_caches import OpenChunkCache, descriptors_to_keep_open
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.fuse.config import MountConfig
from zarrfuse.storage.store_watch import WatchState

__all__ = [
    "READ_ONLY_TIMEOUT", "TEST_CLOCK", "WATCH_SET_UP_WAIT", "WRITABLE_TIMEOUT", "followed",
    "kernel_timeout", "metadata_ttl", "open_chunks", "store_watch", "ttl_clock",
]

# Read-only mounts let the kernel cache names, attributes and pages for long: `ls -lR` of
# 100k files took 92 s with timeouts of 0 and 3.5 s with 300 s (measured, DESIGN.md).
READ_ONLY_TIMEOUT = 3600.0
# Writable mounts keep the kernel's view short-lived so other writers show up soon; while
# the store watch runs, every change to a chunk file reaches the kernel, which may then keep
# chunk files as long as on a read-only mount (``Attributes.followed``).
WRITABLE_TIMEOUT = 1.0
WATCH_SET_UP_WAIT = 2.0
"""Seconds a writable mount waits for its store watch before the first answer: set up by
then, it counts at once (docs/performance.md, "A writable mount sets its store watch up")."""


def metadata_ttl(config: MountConfig) -> float | None:
    """How long listings are trusted (None: forever); ``--metadata-ttl`` or the default."""
    if config.metadata_ttl is not None:
        return config.metadata_ttl
    return None if config.read_only else WRITABLE_TIMEOUT


def kernel_timeout(config: MountConfig) -> float:
    """The kernel's entry and attribute timeout (``followed`` nodes aside): the metadata TTL,
    or a read-only mount's hour; 0 under ``TEST_CLOCK`` (no test moves the kernel's clock)."""
    ttl = metadata_ttl(config)
    if ttl is None:
        return READ_ONLY_TIMEOUT
    return 0.0 if os.environ.get(TEST_CLOCK) else ttl


def followed(config: MountConfig) -> bool:
    """Whether a writable mount keeps its chunk files long while the store watch runs (not
    with ``--metadata-ttl``, which says how long to trust them)."""
    return config.watch and not config.read_only and config.metadata_ttl is None


def store_watch(config: MountConfig, *, local: bool, clock: Callable[[], float]
                ) -> WatchState | None:
    """The state of a local store's watch (``--watch``); where ``followed``, one set up after
    serving began counts only once what was learnt unwatched has expired (one TTL)."""
    if not config.watch or not local:
        return None
    return WatchState(WRITABLE_TIMEOUT if followed(config) else 0.0, clock)


def open_chunks(config: MountConfig, following: WatchState | None, clock: Callable[[], float]
                ) -> OpenChunkCache | None:
    """Chunks kept open, up to a share of the process's descriptors: a read-only mount's,
    and a writable one's while the store watch runs (which ends by emptying it)."""
    if config.read_only:
        return OpenChunkCache(descriptors_to_keep_open(), Trust(metadata_ttl(config), clock=clock))
    if following is None or not followed(config):
        return None
    cache = OpenChunkCache(descriptors_to_keep_open(), only_while=lambda: following.live)

    async def emptied() -> None:
        cache.clear()

    following.when_ended(emptied)
    return cache


# --- the test seam (docs/contributing.md) ----------------------------------------------------

TEST_CLOCK = "ZARRFUSE_TEST_CLOCK"
"""For tests only: a file holding seconds every TTL of the mount reads its clock ahead by
(docs/contributing.md, "test seam")."""


def ttl_clock() -> Callable[[], float]:
    """The clock every TTL of a mount reads: the monotonic one, or ahead of it under
    ``TEST_CLOCK``."""
    path = os.environ.get(TEST_CLOCK)
    if not path:
        return time.monotonic

    def ahead() -> float:  # read at each look: the test moves it at any time
        try:
            return float(Path(path).read_text() or 0)
        except (OSError, ValueError):
            return 0.0

    return lambda: time.monotonic() + ahead()
