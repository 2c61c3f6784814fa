"""A view the catalog rebuilds (its array rewritten behind the mount) never serves what its
predecessor rendered: the shared render caches key each source by its own number, not by
``id()``, which CPython hands a new object at a freed one's address (issue 30's defect)."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import types
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import tifffile
import zarr

from tests.inprocess import TtlClock, in_process
from zarrfuse.filesystem.chunks.chunk_decoder import ChunkDecoder
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.recently_used import FOR_EVER
from zarrfuse.filesystem.images.rendered_chunks import RenderedChunks


@contextmanager
def _young_heap_only() -> Iterator[None]:
    """``gc.collect()`` scans only objects made from here on: what the test session made
    before is frozen, so each collection takes milliseconds, not seconds, late in a run."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_a_rebuilt_view_renders_the_new_values_every_time(tmp_path, monkeypatch):
    clock = TtlClock(monkeypatch)
    zarr.create_group(tmp_path)
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(8, 8), chunks=(8, 8), dtype="u1", fill_value=0)
    with in_process(str(path.parent), format="tiff", read_only=True, metadata_ttl=1.0
                    ) as fs, _young_heap_only():
        seen = []
        for value in range(1, 25):
            # A new shape each round: the documents change, so the view is rebuilt.
            zarr.create_array(path, shape=(8, 8 + value % 2), chunks=(8, 8), dtype="u1",
                              fill_value=0, overwrite=True)[...] = value
            clock.ahead += 2.0  # past the metadata TTL
            gc.collect()  # the old view's source freed: its address free for the new one
            files = sorted(f"arr/{f}" for f in fs.walk("arr") if f.endswith(".tiff"))
            picture = tifffile.imread(io.BytesIO(fs.read(files[0])))
            seen.append(int(np.unique(picture)[0]) if len(np.unique(picture)) == 1 else -1)
        assert seen == list(range(1, 25))


def test_sources_never_share_cache_keys_even_at_a_reused_address():
    """The defect itself: CPython gives a new source a freed one's address (``id()``), so
    keys made of ``id()`` would hand the new source the old one's renderings."""
    array = zarr.create_array({}, shape=(8, 8), chunks=(8, 8), dtype="u1", fill_value=0)
    context = MountContext(None, FOR_EVER)  # type: ignore[arg-type]  (nothing is read)
    addresses, keys = set(), set()
    made = 0
    with _young_heap_only():
        # Until an address was reused (the case the keys must survive), at least 50 made:
        # whether and when the allocator reuses one is its own business.
        while made < 50 or (len(addresses) == made and made < 2000):
            stored = types.SimpleNamespace(context=context)  # nothing is read
            source = RenderedChunks(array, "tiff", decoder=ChunkDecoder(array, stored))  # type: ignore[arg-type]
            addresses.add(id(source))
            keys.add(source.cache_key((0, 0)))
            made += 1
            del source
            gc.collect()
    assert len(addresses) < made, made  # an address was reused
    assert len(keys) == made


def _deleted_files_open(under: str) -> list[str]:
    """This process's descriptors of files under ``under`` that were deleted since."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(under) and target.endswith(" (deleted)"):
                found.append(target)
    return found


def test_a_rebuilt_view_lets_go_of_the_chunks_its_predecessor_kept_open(tmp_path, monkeypatch):
    """The view a rebuild replaces closes the chunks it kept open: the store's replaced
    files are not held (their disk space with them) until they leave a cache or the mount
    ends (issue 53 point 5)."""
    clock = TtlClock(monkeypatch)
    zarr.create_group(tmp_path)
    path = tmp_path / "arr"
    for fmt in ("raw", "tiff"):
        zarr.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u1", fill_value=0,
                          overwrite=True)[...] = 1
        with in_process(str(tmp_path), format=fmt, read_only=True, metadata_ttl=1.0) as fs:
            before = {f: fs.read(f"arr/{f}") for f in fs.walk("arr") if "zarr.json" not in f}
            assert before
            zarr.create_array(path, shape=(8, 12), chunks=(4, 4), dtype="u1", fill_value=0,
                              overwrite=True)[...] = 2  # every chunk file replaced, one more
            clock.ahead += 2.0  # past the metadata TTL: the view is rebuilt
            after = {f: fs.read(f"arr/{f}") for f in fs.walk("arr") if "zarr.json" not in f}
            assert len(after) > len(before) and all(after[f] != before[f] for f in before)
            assert _deleted_files_open(str(path)) == [], fmt
