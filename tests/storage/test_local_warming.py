"""Opens that never wait in the trio thread, and the kernel's caches warmed ahead of a reader
(``storage.beneath``'s ``cached_only``, ``storage.local_warming``), on a real directory.

Dropping the kernel's dentries (``/proc/sys/vm/drop_caches``, as root) makes a path uncached;
a store on tmpfs keeps its dentries whatever is dropped, so those tests need a disk.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kernel_caches import on_tmpfs
from zarrfuse.storage.beneath import LOCAL_DISK, Root, _filesystem_type
from zarrfuse.storage.local import LocalBackend
from zarrfuse.storage.local_warming import QUEUED, KernelWarming

# One worker runs this module: a test here that drops the kernel's caches on another worker
# would uncache the files a warming test has just warmed (seen once in a full run: the last
# file "was not warmed within 10 s").
pytestmark = pytest.mark.xdist_group("kernel-caches")


def _forget_names(store: Path) -> None:
    """Drop the kernel's unused dentries and inodes, or skip where that cannot uncache."""
    if os.geteuid() != 0:
        pytest.skip("dropping the kernel's caches needs root")
    if on_tmpfs(store):
        pytest.skip("tmpfs keeps every dentry: nothing can be uncached")
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
    except OSError as e:  # a container's read-only /proc/sys
        pytest.skip(f"cannot drop the kernel's caches here: {e}")


WARMED_WITHIN = 60.0
"""Seconds the files asked for may take to be warmed (a bound, not a wait: met at once)."""


def _warming_state(backend: LocalBackend, keys: list[str]) -> str:
    """Why files were not warmed: the warming thread's stack and queue, and which of
    ``keys`` the kernel holds now."""
    warming = backend._warming
    thread = warming._thread
    frame = None if thread is None else sys._current_frames().get(thread.ident or 0)
    where = "never started" if thread is None else (
        "".join(traceback.format_stack(frame)) if frame is not None else "ended")
    cached = []
    for key in keys:
        if (reader := backend.open_reader_nowait([key])) is not None:
            reader.close()
            cached.append(key)
    return (f"the last file asked for was not warmed within {WARMED_WITHIN} s; cached now: "
            f"{cached}; queued: {list(warming._queue)}; the warming thread: {where}")


def _store(tmp_path: Path, n: int) -> Path:
    store = tmp_path / "store"
    (store / "c").mkdir(parents=True)
    for i in range(n):
        (store / "c" / str(i)).write_bytes(bytes([i]) * 4096)
    return store


def test_a_cached_only_open_refuses_an_uncached_path_and_takes_a_cached_one(tmp_path):
    store = _store(tmp_path, 1)
    root = Root(str(store))
    if not root.can_resolve_cached:
        pytest.skip("the kernel has no RESOLVE_CACHED (Linux < 5.12)")
    _forget_names(store)
    with pytest.raises(BlockingIOError):
        root.open_regular("c/0", cached_only=True)
    os.close(root.open_regular("c/0"))  # the waiting open caches the path
    fd = root.open_regular("c/0", cached_only=True)
    assert fd is not None
    try:
        assert os.pread(fd, 1, 0) == b"\x00"
    finally:
        os.close(fd)
    root.close()


def test_a_cached_only_open_never_resolves_an_absolute_symlink_in_the_caller(tmp_path):
    """realpath may wait on the disk: a symlink that needs it is left to a worker thread,
    which still reads it (beneath the root)."""
    store = _store(tmp_path, 1)
    (store / "c" / "link").symlink_to(store / "c" / "0")
    root = Root(str(store))
    with pytest.raises(BlockingIOError):
        root.open_regular("c/link", cached_only=True)
    fd = root.open_regular("c/link")
    assert fd is not None
    os.close(fd)
    root.close()


@pytest.mark.expect_log(r"not a regular file \(FIFO\)")
def test_a_special_file_is_refused_by_a_cached_only_open_too(tmp_path):
    store = _store(tmp_path, 1)
    os.mkfifo(store / "c" / "fifo")
    backend = LocalBackend(store)
    if not backend._beneath.can_resolve_cached:
        pytest.skip("not a local disk, or a kernel without RESOLVE_CACHED: opens wait")
    os.stat(store / "c" / "fifo")  # its path is cached: the refusal is the file's kind
    with pytest.raises(OSError, match="not a regular file"):
        backend.open_reader_nowait(["c/fifo"])
    backend.close()


def test_files_after_one_that_waited_are_warmed_and_then_open_without_waiting(tmp_path):
    store = _store(tmp_path, 12)
    backend = LocalBackend(store)
    if not backend._beneath.can_resolve_cached:
        pytest.skip("the kernel has no RESOLVE_CACHED (Linux < 5.12)")
    _forget_names(store)
    assert backend.open_reader_nowait(["c/5"]) is None  # uncached: the caller must wait
    following = [(f"c/{i}", 4096) for i in range(1, 9)]
    backend.warm_after("c/0", lambda: following, waited=True)
    # Alone, or beside the rest of the fast tier, the warming takes 10-16 ms (700 runs). One
    # full run found c/8 uncached after 10 s, cause unknown: the bound is now far above any
    # disk's wait, and a failure says where the warming thread was and what was cached.
    deadline = time.monotonic() + WARMED_WITHIN
    while True:
        reader = backend.open_reader_nowait(["c/8"])
        if reader is not None or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert reader is not None, _warming_state(backend, [key for key, _ in following])
    got = bytearray(4096)
    assert reader.read_into_nowait(0, 0, memoryview(got)) in (0, 4096)  # pages may be on the way
    reader.read_into(0, 0, memoryview(got))
    assert bytes(got) == bytes([8]) * 4096
    reader.close()
    for i in range(1, 9):  # every file asked for opens from the caches now
        opened = backend.open_reader_nowait([f"c/{i}"])
        assert opened is not None, f"c/{i} was not warmed"
        opened.close()
    backend.close()


def test_a_reader_whose_files_are_cached_sets_no_warming_to_work(tmp_path):
    """A second pass over cached files: reads that did not wait, of files not warmed here,
    never even name the files after them."""
    store = _store(tmp_path, 4)
    backend = LocalBackend(store)
    asked: list[str] = []

    def following() -> list[tuple[str, int]]:
        asked.append("named")
        return [("c/1", 4096)]

    backend.warm_after("c/0", following, waited=False)
    assert asked == []
    backend.warm_after("c/0", following, waited=True)  # a read that waited: the next are due
    assert asked == ["named"]
    backend.close()


def test_a_reader_walking_through_files_names_the_next_ones_once_per_half_window():
    """Each file of a cold streak waited, but the files after it are named again only
    halfway through the window asked for last (naming them costs more than a small read),
    and every file is still asked for before the reader reaches it."""
    warming = KernelWarming(lambda key, cached_only: None)  # every file absent: no work
    named: list[int] = []
    asked: set[str] = set()

    def following(i: int) -> Callable[[], list[tuple[str, int]]]:
        def name() -> list[tuple[str, int]]:
            named.append(i)
            files = [(f"c/{j}", 4096) for j in range(i + 1, i + 9)]
            asked.update(key for key, _ in files)
            return files

        return name

    for i in range(100):
        if i:
            assert f"c/{i}" in asked, f"c/{i} was reached before it was asked for"
        warming.after(f"c/{i}", following(i), waited=True)
    warming.close()
    assert len(named) <= 100 // 3, named  # every file once named them all: 100 calls
    assert named[:3] == [0, 4, 10], named


def test_more_files_than_the_queue_holds_warm_the_nearest():
    """Handed more files than it queues, the thread warms the first ones (the reader's
    next), not the last: the queue drops its oldest only for files asked for later."""
    opened: list[str] = []
    warming = KernelWarming(lambda key, cached_only: opened.append(key))
    warming.want([(f"c/{i}", 1) for i in range(QUEUED + 36)])
    deadline = time.monotonic() + 10
    while len(opened) < QUEUED and time.monotonic() < deadline:
        time.sleep(0.01)
    warming.close()
    assert opened == [f"c/{i}" for i in range(QUEUED)]


def test_warming_stops_with_the_backend(tmp_path):
    store = _store(tmp_path, 40)
    backend = LocalBackend(store)
    backend.warm_after("c/0", lambda: [(f"c/{i}", 4096) for i in range(1, 40)], waited=True)
    thread = backend._warming._thread
    backend.close()  # joins the thread: nothing runs past the unmount
    assert thread is not None and not thread.is_alive()
    backend.warm_after("c/0", lambda: [("c/1", 4096)], waited=True)  # after close: nothing


def test_a_store_not_on_a_local_disk_never_opens_in_the_caller():
    """On NFS even an open of a cached path may ask the server (its close-to-open check): a
    store on any filesystem not known as a local disk opens every chunk in a worker thread.
    procfs stands in for such a filesystem here."""
    assert _filesystem_type("/proc/self") == "proc"
    assert "proc" not in LOCAL_DISK
    assert not Root("/proc/self").can_resolve_cached
