"""What a file's open and close cost a mount, driven in process through the adapter: a
read-only mount takes no FLUSH round trip per close, keeps the chunks of a second pass open
within its descriptor budget, and opens a chunk whose path the kernel has cached without a
worker thread."""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyfuse3
import pytest
import trio
import zarr

from tests.adapter.test_operations import CTX, ENTRY_TIMEOUT, ROOT
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import build_filesystem
from zarrfuse.fuse.operations import FuseOperations
from zarrfuse.storage.beneath import Root
from zarrfuse.storage.local import LocalBackend
from zarrfuse.storage.local_files import LocalPartReader

CHUNKS = 300  # past the 256 one array used to keep open


@pytest.fixture
def many_chunks(tmp_path) -> Path:
    path = tmp_path / "a.zarr"
    zarr.create_array(path, shape=(2 * CHUNKS,), chunks=(2,), dtype="u1", compressors=None,
                      fill_value=0)[...] = np.arange(2 * CHUNKS, dtype="u1")
    return path


async def _inodes(ops: FuseOperations) -> list[int]:
    """Every chunk file's inode, in chunk order, found through lookups (fanout names)."""
    out = []
    c = (await ops.lookup(ROOT, b"c", CTX)).st_ino
    for i in range(CHUNKS):
        inode = c
        for name in ("0", f"{i:03d}"):  # the fanout name of a coordinate under 1000
            inode = (await ops.lookup(inode, name.encode(), CTX)).st_ino
        out.append(inode)
    return out


async def _read_all(ops: FuseOperations, inodes: list[int]) -> list[bytes]:
    got = []
    for inode in inodes:
        fh = (await ops.open(inode, os.O_RDONLY, CTX)).fh
        got.append(bytes(await ops.read(fh, 0, 1 << 20)))
        try:
            await ops.flush(fh)
        except pyfuse3.FUSEError as e:
            assert e.errno == errno.ENOSYS
        await ops.release(fh)
    return got


def drive(source: Path, body: Callable[[FuseOperations], Awaitable[None]], **options: Any):
    """Run ``body`` with the adapter of ``zarrfuse mount SOURCE`` with ``options``, the
    filesystem and the adapter counting into one ``Counters``, as a mount's do."""

    async def main() -> None:
        config = MountConfig(source=str(source), mountpoint="/nonexistent", **options)
        counters = Counters()
        fs, _ = build_filesystem(config, counters)
        async with fs.namespace.catalog.context.running():
            await body(FuseOperations(fs, entry_timeout=ENTRY_TIMEOUT, attr_timeout=1.0,
                                      counters=counters))

    trio.run(main)


def _expected() -> list[bytes]:
    return [bytes([(2 * i) % 256, (2 * i + 1) % 256]) for i in range(CHUNKS)]


def test_a_read_only_mount_answers_flush_with_enosys_and_counts_no_error(many_chunks):
    """ENOSYS tells the kernel to stop sending FLUSH for the mount's life: a close then
    costs no round trip. It is no failure: the error counters stay empty."""

    async def body(ops: FuseOperations) -> None:
        inode = (await _inodes(ops))[0]
        fh = (await ops.open(inode, os.O_RDONLY, CTX)).fh
        with pytest.raises(pyfuse3.FUSEError) as caught:
            await ops.flush(fh)
        assert caught.value.errno == errno.ENOSYS
        await ops.release(fh)
        assert dict(ops.counters.errors) == {}

    drive(many_chunks, body, read_only=True)


def test_a_writable_mount_still_answers_flush_so_close_reports_a_refused_write(many_chunks):
    async def body(ops: FuseOperations) -> None:
        inode = (await _inodes(ops))[0]
        fh = (await ops.open(inode, os.O_RDONLY, CTX)).fh
        await ops.flush(fh)  # no ENOSYS: the kernel keeps sending FLUSH, writers need it
        await ops.release(fh)

    drive(many_chunks, body)


def test_a_second_pass_over_more_chunks_than_one_array_kept_finds_every_one_open(many_chunks):
    async def body(ops: FuseOperations) -> None:
        inodes = await _inodes(ops)
        assert await _read_all(ops, inodes) == _expected()
        opened = ops.counters.store["open"]
        hits = ops.counters.cache["open_hit"]
        assert await _read_all(ops, inodes) == _expected()
        assert ops.counters.store["open"] == opened  # nothing opened again
        assert ops.counters.cache["open_hit"] - hits == CHUNKS

    drive(many_chunks, body, read_only=True)


def test_chunks_kept_open_stay_within_the_mounts_descriptor_budget(many_chunks, monkeypatch):
    budget = 16
    monkeypatch.setattr("zarrfuse.fuse.cache_times.descriptors_to_keep_open", lambda: budget)

    async def body(ops: FuseOperations) -> None:
        inodes = await _inodes(ops)
        before = len(os.listdir("/proc/self/fd"))
        assert await _read_all(ops, inodes) == _expected()
        assert len(os.listdir("/proc/self/fd")) - before <= budget

    drive(many_chunks, body, read_only=True)


def test_a_chunk_whose_path_the_kernel_holds_opens_without_a_worker_thread(many_chunks):
    """The store's files were just written, so their paths are cached: no open waits in a
    worker thread (each hop costs 0.1-0.4 ms), on writable mounts too."""
    if not Root(str(many_chunks)).can_resolve_cached:
        pytest.skip("not a local disk, or a kernel without RESOLVE_CACHED: opens wait")

    async def body(ops: FuseOperations) -> None:
        inodes = await _inodes(ops)
        steps = _SchedulerSteps()
        trio.lowlevel.add_instrument(steps)
        fh = (await ops.open(inodes[0], os.O_RDONLY, CTX)).fh
        trio.lowlevel.remove_instrument(steps)
        assert steps.count == 0  # answered without leaving the trio thread, nor yielding
        await ops.release(fh)
        assert await _read_all(ops, inodes) == _expected()
        assert ops.counters.cache["open_in_thread"] == 0
        assert ops.counters.store["open"] == CHUNKS + 1

    drive(many_chunks, body)


class _SchedulerSteps(trio.abc.Instrument):
    """Counts the task steps trio runs: a request that waits on a thread or yields runs some."""

    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


def test_readdir_works_out_only_the_entries_the_kernel_takes(many_chunks, monkeypatch):
    """The kernel takes a page of entries per readdir call: the rest of a big directory is
    not given inodes nor attributes then (``find`` over 100,000 files did n**2 / 60 of
    them)."""
    taken: list[bytes] = []

    def reply(token: Any, name: bytes, entry: Any, next_id: int) -> bool:
        if len(taken) == 10:
            return False
        taken.append(name)
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)

    async def body(ops: FuseOperations) -> None:
        c = (await ops.lookup(ROOT, b"c", CTX)).st_ino
        leaf = (await ops.lookup(c, b"0", CTX)).st_ino
        fh = await ops.opendir(leaf, CTX)
        before = ops.fs.namespace.inode_count
        await ops.readdir(fh, 0, None)
        assert len(taken) == 10
        assert ops.fs.namespace.inode_count - before <= 10  # not CHUNKS
        await ops.releasedir(fh)

    drive(many_chunks, body, read_only=True)


def test_a_chunk_kept_open_and_read_again_from_storage_reads_ahead_again(many_chunks):
    """A second pass finds the chunks open, but their bytes may have left the page cache
    meanwhile (memory pressure, a bigger pass): a chunk read that waits on storage again
    warms the files after it again, as on the first pass. It used to warm them only once per
    kept chunk, so such a pass waited on a worker thread for every file.

    The page cache's answer is decided by the test, at the one place the mount asks it (the
    reader's ``RWF_NOWAIT`` read): evicting pages for real is not deterministic (a busy
    machine's warming or readahead brings them back), and this test failed one run in two
    that way."""
    warmed: list[bool] = []
    real_warm = LocalBackend.warm_after
    real_nowait = LocalPartReader.read_into_nowait
    evicted = False

    def warm_after(backend: LocalBackend, key: str, following: Any, *, waited: bool) -> None:
        warmed.append(waited)
        real_warm(backend, key, following, waited=waited)

    def read_into_nowait(reader: LocalPartReader, part: int, start: int,
                         out: memoryview) -> int:
        return 0 if evicted else real_nowait(reader, part, start, out)

    async def body(ops: FuseOperations) -> None:
        nonlocal evicted
        inodes = await _inodes(ops)
        assert await _read_all(ops, inodes) == _expected()
        first = len(warmed)
        assert first >= 1  # every chunk read to its end the first time
        evicted = True  # the store's pages left the page cache
        hits, waits = ops.counters.cache["open_hit"], ops.counters.store["read"]
        assert await _read_all(ops, inodes[:1]) == _expected()[:1]
        assert ops.counters.cache["open_hit"] == hits + 1  # kept open
        assert ops.counters.store["read"] == waits + 1  # its bytes were read from the disk
        assert warmed[first:] == [True]  # and the files after it are warmed again

    with (mock.patch.object(LocalBackend, "warm_after", warm_after),
          mock.patch.object(LocalPartReader, "read_into_nowait", read_into_nowait)):
        drive(many_chunks, body, read_only=True)

