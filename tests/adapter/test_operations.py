"""The pyfuse3 adapter driven in process, with a stand-in for the kernel's side of each call
(issue 30, point 3): lookup and forget counts, readdir's dots, offsets and a full buffer,
negative entries, errno mapping, and the invalidations the adapter sends after a commit.

``FuseOperations`` runs on the ``FileSystem`` a mount of the same source serves
(``build_filesystem``); only what pyfuse3 sends to the kernel (``readdir_reply``,
``invalidate_inode``, ``invalidate_entry``) is recorded here instead.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyfuse3
import pytest
import trio
import zarr

from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import build_filesystem
from zarrfuse.fuse.operations import FuseOperations

ROOT = pyfuse3.ROOT_INODE
CTX = pyfuse3.RequestContext()
ENTRY_TIMEOUT = 7.0


class Kernel:
    """The kernel's side: takes ``room`` readdir entries per call, records invalidations."""

    def __init__(self) -> None:
        self.room: int | None = None
        self.listed: list[tuple[str, int, int]] = []
        self.invalidated: list[tuple[int, bool]] = []
        self.entries_dropped: list[tuple[int, bytes]] = []

    def readdir_reply(self, token: Any, name: bytes, entry: Any, next_id: int) -> bool:
        if self.room is not None:
            if self.room == 0:
                return False
            self.room -= 1
        self.listed.append((os.fsdecode(name), entry.st_ino, next_id))
        return True

    def invalidate_inode(self, inode: int, attr_only: bool = False) -> None:
        self.invalidated.append((inode, attr_only))

    def invalidate_entry(self, parent: int, name: bytes, *rest: Any) -> None:
        self.entries_dropped.append((parent, name))


@pytest.fixture
def array(tmp_path) -> Path:
    path = tmp_path / "a.zarr"
    zarr.create_array(path, shape=(4, 6), chunks=(2, 2), dtype="u1", compressors=None,
                      fill_value=0)[...] = np.arange(24, dtype="u1").reshape(4, 6)
    return path


def drive(source: Path, body: Callable[[FuseOperations], Awaitable[None]], **options: Any):
    """Run ``body`` with the adapter of ``zarrfuse mount SOURCE`` with ``options``."""

    async def main() -> None:
        config = MountConfig(source=str(source), mountpoint="/nonexistent", **options)
        fs, _ = build_filesystem(config)
        async with fs.namespace.catalog.context.running():
            await body(FuseOperations(fs, entry_timeout=ENTRY_TIMEOUT, attr_timeout=1.0))

    trio.run(main)


async def _path(ops: FuseOperations, path: str) -> int:
    inode = ROOT
    for name in path.split("/"):
        inode = (await ops.lookup(inode, os.fsencode(name), CTX)).st_ino
    return inode


def _known(ops: FuseOperations, inode: int) -> bool:
    return ops.fs.namespace.known(inode) is not None


def test_lookups_count_and_forget_drops_an_inode_at_zero(array, kernel):
    async def body(ops: FuseOperations) -> None:
        first = (await ops.lookup(ROOT, b"c", CTX)).st_ino
        assert (await ops.lookup(ROOT, b"c", CTX)).st_ino == first
        await ops.forget([(first, 1)])
        assert _known(ops, first)  # one lookup still held
        await ops.forget([(first, 1)])
        assert not _known(ops, first)
        await ops.forget([(ROOT, 5)])  # the root is never forgotten
        assert _known(ops, ROOT)

    drive(array, body, read_only=True)


def test_readdir_gives_dots_first_shifts_offsets_and_remembers_taken_entries(array, kernel):
    async def body(ops: FuseOperations) -> None:
        fh = await ops.opendir(ROOT, CTX)
        await ops.readdir(fh, 0, None)
        names = [name for name, _, _ in kernel.listed]
        assert names[:2] == [".", ".."]
        assert "c" in names and "zarr.json" in names
        assert [next_id for _, _, next_id in kernel.listed] == list(
            range(1, len(names) + 1))
        assert kernel.listed[0][1] == kernel.listed[1][1] == ROOT  # the root is its own ..
        # From an offset: no dots again, and the rest after the entry that offset names.
        kernel.listed.clear()
        await ops.readdir(fh, 3, None)
        assert [name for name, _, _ in kernel.listed] == names[3:]
        await ops.releasedir(fh)
        c = next(inode for name, inode, _ in kernel.listed if name == "c")
        await ops.forget([(c, 1)])  # both readdirs gave it: the kernel holds it twice
        assert _known(ops, c)
        await ops.forget([(c, 1)])
        assert not _known(ops, c)

    drive(array, body, read_only=True)


def test_an_entry_the_kernel_had_no_room_for_is_not_remembered(array, kernel):
    async def body(ops: FuseOperations) -> None:
        fh = await ops.opendir(ROOT, CTX)
        kernel.room = 3  # ".", "..", and one entry
        await ops.readdir(fh, 0, None)
        taken = kernel.listed[2]
        await ops.releasedir(fh)
        # Taken once: one forget drops it. The next entry was refused: not remembered, so
        # a lookup of it counts one, and one forget drops it.
        await ops.forget([(taken[1], 1)])
        assert not _known(ops, taken[1])
        fh = await ops.opendir(ROOT, CTX)
        kernel.room, kernel.listed = None, []
        await ops.readdir(fh, 0, None)
        await ops.releasedir(fh)
        refused_name = kernel.listed[3][0]
        inode = (await ops.lookup(ROOT, os.fsencode(refused_name), CTX)).st_ino
        await ops.forget([(inode, 2)])  # the full readdir above took it once, the lookup once
        assert not _known(ops, inode)

    drive(array, body, read_only=True)


def test_an_absent_name_is_a_negative_entry_the_kernel_may_remember(array, kernel):
    async def body(ops: FuseOperations) -> None:
        entry = await ops.lookup(ROOT, b"no-such-name", CTX)
        assert entry.st_ino == 0
        assert entry.entry_timeout == ENTRY_TIMEOUT

    drive(array, body, read_only=True)


def _errno_of(call: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[int | None]]:
    async def run() -> int | None:
        try:
            await call()
        except pyfuse3.FUSEError as e:
            return e.errno
        return None

    return run


@pytest.mark.expect_log(r"the mount is read-only", r"is not a directory")
def test_refusals_reach_the_kernel_as_their_errno(array, kernel):
    async def body(ops: FuseOperations) -> None:
        c = await _path(ops, "c")
        assert await _errno_of(lambda: ops.unlink(c, b"0", CTX))() == errno.EROFS
        assert await _errno_of(lambda: ops.symlink(c, b"x", b"y", CTX))() in (
            errno.EROFS, errno.EPERM)
        chunk = await _path(ops, "c/0/000/0/000")
        assert await _errno_of(lambda: ops.opendir(chunk, CTX))() == errno.ENOTDIR
        assert await _errno_of(lambda: ops.getattr(10**9, CTX))() == errno.ENOENT

    drive(array, body, read_only=True)


def test_a_writer_beside_a_reader_is_sent_to_a_fresh_inode_and_the_reader_keeps_its_version(
    array, kernel
):
    """The page-cache rule at the adapter: a writer opening the inode a reader holds gets
    ESTALE (the kernel then looks the name up again), works on an inode of its own, and
    after its commit the name's next lookup is a fresh inode showing the new chunk."""

    async def body(ops: FuseOperations) -> None:
        path = "c/0/000/0/001"
        held = await _path(ops, path)
        reader = await ops.open(held, os.O_RDONLY, CTX)
        old = bytes(await ops.read(reader.fh, 0, 4))
        with pytest.raises(pyfuse3.FUSEError) as sent_away:
            await ops.open(held, os.O_WRONLY, CTX)
        assert sent_away.value.errno == errno.ESTALE
        own = await _path(ops, path)
        assert own != held
        writer = await ops.open(own, os.O_WRONLY, CTX)
        await ops.write(writer.fh, 0, b"\xff" * 4)
        await ops.flush(writer.fh)
        await ops.release(writer.fh)
        fresh = await _path(ops, path)
        assert fresh not in (held, own)
        reopened = await ops.open(fresh, os.O_RDONLY, CTX)
        assert bytes(await ops.read(reopened.fh, 0, 4)) == b"\xff" * 4
        assert bytes(await ops.read(reader.fh, 0, 4)) == old  # its version, unchanged
        for fh in (reopened.fh, reader.fh):
            await ops.release(fh)

    drive(array, body)


def test_a_chunk_replaced_by_rename_drops_the_kernels_pages_and_size_of_its_inode(
    array, kernel
):
    """rsync's save: a temp file renamed over a chunk the kernel holds (looked up, no
    handle): the adapter tells the kernel to drop that inode's pages and attributes."""

    async def body(ops: FuseOperations) -> None:
        held = await _path(ops, "c/0/000/0/001")
        parent = await _path(ops, "c/0/000/0")
        info, _ = await ops.create(parent, b".001.tmp", 0o644, os.O_WRONLY | os.O_CREAT, CTX)
        await ops.write(info.fh, 0, b"\xff" * 4)
        await ops.flush(info.fh)
        await ops.release(info.fh)
        kernel.invalidated.clear()
        await ops.rename(parent, b".001.tmp", parent, b"001", 0, CTX)
        assert kernel.invalidated == [(held, False)]
        reopened = await ops.open(await _path(ops, "c/0/000/0/001"), os.O_RDONLY, CTX)
        assert bytes(await ops.read(reopened.fh, 0, 4)) == b"\xff" * 4
        await ops.release(reopened.fh)

    drive(array, body)


def test_an_inode_whose_chunk_is_gone_is_stale_so_the_kernel_looks_the_name_up_again(
    array, kernel
):
    """A chunk removed behind the kernel's back (another writer; a refused new file
    released) while the kernel still holds its inode: getattr and open answer ESTALE, which
    the kernel answers by looking the name up again. ENOENT would be final even for
    ``open(O_CREAT)`` through the cached entry (its permission check asks getattr)."""

    async def body(ops: FuseOperations) -> None:
        held = await _path(ops, "c/0/000/0/001")
        (array / "c/0/1").unlink()  # removed by another writer
        for call in (lambda: ops.getattr(held, CTX),
                     lambda: ops.open(held, os.O_RDONLY, CTX)):
            assert await _errno_of(call)() == errno.ESTALE
        parent = await _path(ops, "c/0/000/0")
        again = await ops.lookup(parent, b"001", CTX)
        assert again.st_ino == 0  # the name's own answer: no such file
        assert await _errno_of(lambda: ops.getattr(10**9, CTX))() == errno.ENOENT

    drive(array, body, metadata_ttl=0)  # the daemon trusts no size it has seen
