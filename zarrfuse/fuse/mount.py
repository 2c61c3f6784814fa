"""Mount lifecycle: open the source, build the filesystem, run pyfuse3 under trio, unmount."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyfuse3
import trio
from zarr.abc.store import Store

from zarrfuse.api.arrays import open_store_path
from zarrfuse.errors import MountError, SourceError
from zarrfuse.filesystem.attributes import Ownership
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.filesystem.fs import FileSystem
from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.array_builder import ArrayBuilder
from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.mounted import ArrayView, Rendering
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ArrayRoot, GroupDir, ImageDir, Node
from zarrfuse.filesystem.writes.commits import WriteOptions
from zarrfuse.fuse.cache_times import (
    READ_ONLY_TIMEOUT,
    WATCH_SET_UP_WAIT,
    followed,
    kernel_timeout,
    metadata_ttl,
    open_chunks,
    store_watch,
    ttl_clock,
)
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.handed_fd import handed_fuse_fd
from zarrfuse.fuse.left_out import left_out_note
from zarrfuse.fuse.mount_refusal import explain, libfuse_words
from zarrfuse.fuse.mountpoint import prepare_mountpoint
from zarrfuse.fuse.operations import FuseOperations
from zarrfuse.storage import Backend, backend_for, cache_identity
from zarrfuse.storage.cached_backend import CachingBackend
from zarrfuse.storage.disk_cache import DiskCache
from zarrfuse.storage.store_watch import WatchState, follow_store
from zarrfuse.zarr_compat import sync

__all__ = ["MountInfo", "MountServices", "serve"]

log = logging.getLogger(__name__)

# The kernel's default readahead (128 KiB) makes every sequential MiB cost 8 FUSE requests;
# 1 MiB matches the largest request the kernel sends (256 pages).
READ_AHEAD_KB = 1024


@dataclass(frozen=True)
class MountInfo:
    """What a live mount is, for the services that report on it."""

    source: str
    mountpoint: str
    kind: str
    """``array`` or ``group``."""
    read_only: bool
    counters: Counters
    started: float
    """``time.time()`` when the filesystem was built."""
    watching: Callable[[], bool] | None = None
    """Whether the store watch runs now; None: the store is not watched."""


class MountServices(Protocol):
    """What runs beside a mount (the stats socket, sd_notify), provided from above so the
    lifecycle imports nothing above itself."""

    def built(self, info: MountInfo) -> None:
        """The filesystem is built; nothing is mounted yet."""

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Started in the mount's nursery before it is announced ready; ``task_status.started()``
        once serving; cancelled at unmount."""

    def ready(self, message: str) -> None:
        """The mount answers requests."""

    def stopping(self, message: str) -> None:
        """The mount is about to go away."""


def _fuse_options(config: MountConfig) -> set[str]:
    options = set(pyfuse3.default_options)
    options |= {"fsname=zarrfuse", "subtype=zarrfuse"}
    if config.read_only:
        options.add("ro")
    options |= set(config.fuse_options)
    return options


def build_operations(
    fs: FileSystem, config: MountConfig, counters: Counters | None = None
) -> FuseOperations:
    """The pyfuse3 adapter over ``fs`` with the timeouts and cache rule ``config`` asks."""
    timeout = kernel_timeout(config)
    return FuseOperations(
        fs, entry_timeout=timeout, attr_timeout=timeout, counters=counters,
        # With a TTL, files may change behind a read-only mount: each open reads them anew.
        keep_cache=config.read_only and config.metadata_ttl is None,
        store_timeout=config.store_timeout,
        followed_timeout=READ_ONLY_TIMEOUT if followed(config) else None,
    )


def build_filesystem(
    config: MountConfig, counters: Counters | None = None
) -> tuple[FileSystem, str]:
    """Open the source and build the filesystem for it; raises before anything is mounted."""
    mode = "r" if config.read_only else "r+"
    store_path = sync(
        open_store_path(config.source, mode=mode, storage_options=config.storage_options or None,
                        allow_redirects=config.allow_redirects)
    )
    backend = backend_for(
        store_path.store, symlink_root=config.symlink_root, path=store_path.path,
        write_time=config.store_timeout,
    )
    if not config.read_only:  # before anything is read: every chunk old or new, not mixed
        backend.recover()
    else:  # may not write: reads as recovery will leave the store, says what is due
        backend.show_recovered()
    clock = ttl_clock()
    following = store_watch(config, local=backend.capabilities.watched_root is not None,
                            clock=clock)
    if config.cache_dir:
        backend = _with_disk_cache(backend, store_path.store, config)
    context = MountContext(
        backend,
        Trust(metadata_ttl(config),
              following.tells_all if following is not None and followed(config) else None,
              clock),
        counters or Counters(),
        open_chunks=open_chunks(config, following, clock),
        cache_bytes=config.cache_mb << 20,
    )
    catalog = Catalog(ArrayBuilder(
        context, suffix=config.suffix, max_children=config.max_children, layout=config.layout,
        update_pyramid=config.update_pyramid and not config.read_only,
        rendering=None if config.format == "raw" else Rendering(
            fmt=config.format, colour=config.colour,
            **({} if config.max_chunk_bytes is None
               else {"max_chunk_bytes": config.max_chunk_bytes}),
        ),
    ))
    loaded = catalog.load(store_path.path)  # one read of the documents: node and time
    if loaded is None:
        raise SourceError(
            f"{config.source}: no zarr.json, .zarray or .zgroup here; not a Zarr array or group"
        )
    view = catalog.view_for(store_path.path, loaded, name=_source_name(config.source))
    root: Node
    if isinstance(view, WholeImage):
        root, kind = ImageDir(view), "image"
    elif isinstance(view, ArrayView):
        root, kind = ArrayRoot(view), "array"
    else:
        root, kind = GroupDir(view), "group"
    options = WriteOptions(
        verify=config.verify,
        max_chunk_bytes=config.max_chunk_bytes,
        scratch_bytes=config.scratch_mb << 20,
    )
    ownership = Ownership(
        uid=os.getuid() if config.uid is None else config.uid,
        gid=os.getgid() if config.gid is None else config.gid,
        umask=config.umask,
    )
    fs = FileSystem(
        Namespace(root, catalog),
        read_only=config.read_only,
        write_options=options,
        ownership=ownership,
        following=following,
    )
    return fs, kind


def _with_disk_cache(backend: Backend, store: Store, config: MountConfig) -> Backend:
    """``backend`` with its chunk bytes kept in ``--cache-dir`` (remote stores only)."""
    identity = cache_identity(store) if backend.capabilities.remote else None
    if identity is None:
        log.info("--cache-dir: %s is not remote; nothing is cached", config.source)
        return backend
    cache = DiskCache(os.path.expanduser(config.cache_dir or ""), config.cache_size)
    log.info("caching chunk bytes in %s (up to %d bytes)", cache.root, cache.limit)
    # Listings kept on disk are trusted for a read-only mount's explicit metadata TTL.
    ttl = config.metadata_ttl if config.read_only else None
    return CachingBackend(backend, cache, identity, listing_ttl=ttl)


def _store_follower(fs: FileSystem, config: MountConfig) -> Callable[[], Awaitable[None]] | None:
    """What follows changes other programs make to a local store (``--watch``)."""
    root = fs.namespace.catalog.backend.capabilities.watched_root
    if fs.following is None or root is None:
        return None
    return functools.partial(follow_store, Path(root), fs.apply_store_changes, fs.following)


def _source_name(source: str) -> str:
    """The last path component of a source (a path or URL), which names whole images."""
    return source.split("?", 1)[0].rstrip("/").rpartition("/")[2]


def _check_live_and_raise_read_ahead(mountpoint: str) -> None:
    """Stat the mount through the kernel (proving the loop answers), then, best effort, let
    the kernel read ahead 1 MiB at a time on it. A handed descriptor's mount is elsewhere,
    and was live before we started."""
    if handed_fuse_fd(mountpoint) is not None:
        return
    device = os.stat(mountpoint).st_dev
    path = f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb"
    try:
        with open(path, "w") as f:
            f.write(str(READ_AHEAD_KB))
    except OSError as e:
        log.debug("cannot raise readahead via %s: %s", path, e)


async def _run(
    mountpoint: str,
    on_ready: Callable[[], None] | None,
    fs: FileSystem,
    services: MountServices | None = None,
    follow: Callable[[], Awaitable[None]] | None = None,
    watch: WatchState | None = None,
) -> str:
    """Serve until unmounted; why it ended. The services are up before ``on_ready``.
    ``fs``: at a signal, stops once its writers have closed (a second signal: at once).
    ``follow``: runs beside the mount (the store watch, whose state is ``watch``)."""
    reason = "unmounted from outside (umount or fusermount3 -u)"
    async with fs.namespace.catalog.context.running(), trio.open_nursery() as nursery:

        async def stop_on_signals() -> None:
            nonlocal reason
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    if reason.startswith("received"):  # the second: at once
                        pyfuse3.terminate()
                        continue
                    reason = f"received {signal.Signals(signum).name}"
                    log.info("%s, unmounting", reason)
                    if services is not None:
                        services.stopping(f"{reason}, unmounting {mountpoint}")
                    nursery.start_soon(fs.stop_once_closed, pyfuse3.terminate)

        async def announce_ready() -> None:
            if services is not None:
                await nursery.start(services.serve)
            await trio.to_thread.run_sync(_check_live_and_raise_read_ahead, mountpoint)
            if services is not None:
                services.ready(f"serving {mountpoint}")
            if on_ready is not None:
                on_ready()

        if threading.current_thread() is threading.main_thread():
            nursery.start_soon(stop_on_signals)  # signals reach the main thread only
        nursery.start_soon(announce_ready)
        if follow is not None:
            nursery.start_soon(follow)
        if watch is not None and watch.settle:
            # Set up before the first request, the watch counts at once: nothing was learnt
            # unwatched. A store too big to watch in time waits its settle time instead.
            with trio.move_on_after(WATCH_SET_UP_WAIT):
                await watch.set_up.wait()
            watch.serving()
        # What serving starts with (modules, the views) is never collected: full collections
        # walk only what requests made (they took a sixth of ``find``'s CPU over 100,000
        # files, walking the imports' objects again and again).
        gc.freeze()
        await pyfuse3.main()
        nursery.cancel_scope.cancel()
    fs.drop_open_writers()
    return reason


# glibc mallopt: buffers up to this size from the heap, freed memory kept (each FUSE write's
# 1 MiB buffer was a fresh mmap: commits took 4.2 ms, not 1.0), and at most HEAP_ARENAS
# arenas (docs/performance.md, "Memory").
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
HEAP_ALLOCATION_LIMIT = 64 << 20
HEAP_KEEP_LIMIT = 1 << 30
HEAP_ARENAS = 2


def _keep_freed_memory() -> None:
    """Best effort (glibc only): reuse freed buffers instead of returning them to the OS."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_ALLOCATION_LIMIT)
        libc.mallopt(M_TRIM_THRESHOLD, HEAP_KEEP_LIMIT)
        libc.mallopt(M_ARENA_MAX, HEAP_ARENAS)
    except (OSError, AttributeError) as e:
        log.debug("mallopt unavailable: %s", e)


GIL_SWITCH_SECONDS = 0.0005
"""How long a thread holding the GIL keeps it while another waits (Python's default: 5 ms).
Colouring composite tiles holds it for most of its numpy steps; the trio thread and the
threads reading chunk files waited up to 5 ms at each hand-back: 0.5 ms read a composite
12-20% faster (3 of 3 interleaved pairs)."""


def _raise_open_file_limit() -> None:
    """Read-only mounts keep recently read chunks open; allow as many files as permitted."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(
    config: MountConfig,
    on_ready: Callable[[], None] | None = None,
    services: MountServices | None = None,
    on_note: Callable[[str], None] | None = None,
) -> None:
    """Mount ``config.source`` at ``config.mountpoint`` and serve until a clean unmount
    (``fusermount3 -u``, SIGINT, SIGTERM); SourceError, ConfigurationError or MountError
    before anything is mounted. ``on_note(line)``: what of a group the view leaves out."""
    counters = Counters()
    _raise_open_file_limit()
    _keep_freed_memory()
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    fs, kind = build_filesystem(config, counters)
    if kind == "group":
        root = fs.namespace.node(pyfuse3.ROOT_INODE)
        assert isinstance(root, GroupDir)
        note = trio.run(left_out_note, fs.namespace.catalog, root.group.path, config.source)
        if note is not None and on_note is not None:  # the log has a line per member
            on_note(note)
    prepare_mountpoint(config.mountpoint)
    ops = build_operations(fs, config, counters)
    following = fs.following
    if services is not None:
        services.built(
            MountInfo(
                source=config.source, mountpoint=config.mountpoint, kind=kind,
                read_only=config.read_only, counters=counters, started=time.time(),
                watching=None if following is None else lambda: following.live,
            )
        )
    options = _fuse_options(config)
    try:
        with libfuse_words() as words:  # libfuse and fusermount3 print their reason
            pyfuse3.init(ops, config.mountpoint, options)
    except RuntimeError as e:
        reason = explain(words.text, privileged=os.geteuid() == 0)
        raise MountError(
            f"cannot mount at {config.mountpoint}: "
            + (reason or f"{e} (FUSE options {','.join(sorted(options))})")
        ) from e
    log.info(
        "mounted %s %s at %s (%s)",
        kind,
        config.source,
        config.mountpoint,
        "read-only" if config.read_only else "writable",
    )
    reason = "serving failed"
    try:
        reason = trio.run(_run, config.mountpoint, on_ready, fs, services,
                          _store_follower(fs, config), fs.following)
    finally:
        fs.log_scratch_left()
        if services is not None:
            services.stopping(f"unmounting {config.mountpoint}")
        pyfuse3.close(unmount=True)
        fs.namespace.catalog.context.close()
        log.info("unmounted %s (%s)", config.mountpoint, reason)
