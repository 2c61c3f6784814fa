"""A pyramid's lower level written through the mount while a full-resolution edit's update
lands (issue 52, point 2): the update takes the commit path (the lower chunk's lock), so
neither write is lost. Driven in process through the adapter; the interleaving is made by
holding the store write the test names (a hook on the mount's backend) until the test lets
it go, never by the clock.

The rule (docs/views.md): the update of a lower chunk is a read-change-write under its chunk
lock, reading the level above under that level's locks. Another writer's commit of the lower
chunk that lands first is kept outside the edited region, which is downsampled again from
the full resolution; one that comes after the update wins whole, as any later commit does.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import tifffile
import trio
import trio.testing
import zarr

from tests.adapter.test_operations import CTX, _path, drive
from tests.picture_paths import tile_path
from zarrfuse.fuse.operations import FuseOperations

pytestmark = pytest.mark.timeout(120)

TOP, LOWER = "0/c/0/000/0/000", "1/c/0/000/0/000"  # chunk (0, 0) of each level's raw view
HELD = 60.0  # the most a held store write waits for the test: a failure, never a hang


def _halved(image: np.ndarray) -> np.ndarray:
    y, x = image.shape
    return np.rint(image.reshape(y // 2, 2, x // 2, 2).mean(axis=(1, 3))).astype(image.dtype)


def _image(root: Path, side: int = 64, **layout: object) -> list[np.ndarray]:
    """An OME-Zarr 0.5 image and its mean level; by default 64 x 64 pixels in 32 x 32
    chunks (the level: one chunk), uncompressed, so a chunk's raw bytes are its pixels."""
    full = np.random.default_rng(52).integers(0, 255, (side, side), dtype="u1")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    for i, level in enumerate((full, _halved(full))):
        zarr.create_array(root / str(i), data=level,
                          **(layout or {"chunks": (32, 32), "compressors": None}))
    group.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "type": "mean",
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0**i, 2.0**i]}]} for i in range(2)]}]}
    return [full, _halved(full)]


def _lock_users(ops: FuseOperations, coords: tuple[int, ...]) -> int:
    """How many tasks hold or wait for chunk ``coords`` of level 1's lock."""
    view = ops.fs.namespace.catalog.cached_views()
    (level,) = [v for v in view if getattr(v, "path", None) == "1"]
    entry = level.stored.locks._locks.get(coords)
    return 0 if entry is None else entry.users


@pytest.mark.parametrize("lands", ["during-update", "before-update"])
def test_a_lower_chunk_written_while_an_edit_updates_it_is_not_lost(tmp_path, kernel, lands):
    """``during-update``: the update has read the level-1 chunk and holds its store write
    when the other writer commits that chunk: the other writer waits for the update and wins
    whole (today's code, past the lock, stored the other writer's chunk and then the
    update's, made from the chunk as it was before: the other writer's write was lost).
    ``before-update``: the other writer's commit lands while the edit's own chunk is being
    stored: the update reads it, keeps it outside the edited block and downsamples the
    block again; the kernel is told to drop the level-1 file it holds."""
    root = tmp_path / "img.ome.zarr"
    full, _ = _image(root)
    edit = np.arange(32 * 32, dtype="u1").reshape(32, 32)
    other = np.full((32, 32), 7, "u1")
    other[::3] = 200

    async def body(ops: FuseOperations) -> None:
        token = trio.lowlevel.current_trio_token()
        backend = ops.fs.namespace.catalog.backend
        write, paused, go = backend.write, trio.Event(), threading.Event()
        hold = "1/c/0/0" if lands == "during-update" else "0/c/0/0"

        def held_write(key: str, *args: object, **kwargs: object) -> int:
            if key.endswith(hold) and not paused.is_set():  # the first write of that key
                trio.from_thread.run_sync(paused.set, trio_token=token)
                assert go.wait(HELD), "the test never let the held store write go"
            return write(key, *args, **kwargs)

        backend.write = held_write
        # Both writers hold their changes; only their commits (flush) are left.
        lower = await ops.open(await _path(ops, LOWER), os.O_WRONLY, CTX)
        await ops.write(lower.fh, 0, other.tobytes())
        top = await ops.open(await _path(ops, TOP), os.O_WRONLY, CTX)
        await ops.write(top.fh, 0, edit.tobytes())
        other_done = trio.Event()

        async def other_commits() -> None:
            await ops.flush(lower.fh)
            other_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.flush, top.fh)  # the edit's commit, then its update
            await paused.wait()
            nursery.start_soon(other_commits)
            if lands == "during-update":
                await trio.testing.wait_all_tasks_blocked()
                if _lock_users(ops, (0, 0)) < 2:  # nothing holds it off (today's code)
                    await other_done.wait()
            else:
                await other_done.wait()
                shown = await _path(ops, LOWER)  # the kernel holds the new version's inode
                kernel.invalidated.clear()
            go.set()
        for fh in (lower.fh, top.fh):
            await ops.release(fh)
        if lands == "before-update":
            assert any(inode == shown for inode, _ in kernel.invalidated), kernel.invalidated
        reader = await ops.open(await _path(ops, LOWER), os.O_RDONLY, CTX)
        seen = bytes(await ops.read(reader.fh, 0, 32 * 32))
        await ops.release(reader.fh)
        np.testing.assert_array_equal(np.frombuffer(seen, "u1").reshape(32, 32),
                                      zarr.open_array(root / "1")[:])

    drive(root, body, verify=False, watch=False)
    edited = full.copy()
    edited[:32, :32] = edit
    np.testing.assert_array_equal(zarr.open_array(root / "0")[:], edited)
    expected = other.copy()
    if lands == "before-update":
        expected[:16, :16] = _halved(edited[:32, :32])
    np.testing.assert_array_equal(zarr.open_array(root / "1")[:], expected)


def test_a_tile_saved_into_a_sharded_image_reaches_the_sharded_level_below(tmp_path, kernel):
    """A rendered tile of a sharded full resolution: its block of the level below is made
    again inside that level's shard (read, changed and stored under the shard's lock), the
    rest of the shard kept."""
    root = tmp_path / "img.ome.zarr"
    full, _ = _image(root, 128, chunks=(16, 16), shards=(64, 64))
    edit = np.arange(256, dtype="u1").reshape(16, 16)

    async def body(ops: FuseOperations) -> None:
        tile = await ops.open(await _path(ops, "0/" + tile_path(1, 2, "tiff")),
                              os.O_WRONLY | os.O_TRUNC, CTX)
        saved = io.BytesIO()
        tifffile.imwrite(saved, edit)
        await ops.write(tile.fh, 0, saved.getvalue())
        await ops.flush(tile.fh)
        await ops.release(tile.fh)

    drive(root, body, format="tiff", watch=False)
    full[16:32, 32:48] = edit
    np.testing.assert_array_equal(zarr.open_array(root / "0")[:], full)
    np.testing.assert_array_equal(zarr.open_array(root / "1")[:], _halved(full))
