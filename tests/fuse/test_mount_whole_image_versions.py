"""One read never mixes two versions of a tile (issue 52, point 1, whole images): two
programs save tiles of a sharded array through a writable ``--format tiff`` mount while
three readers read the whole-image file of a ``--read-only --format ome-tiff`` mount of the
same store, which learns of the saves from its store watch. Every save fills its tile with
a number of its own, so a tile that holds two numbers came from two saves: a torn tile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.mounting import mounted, wait_for

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

SIDE, TILE, SHARD = 1024, 256, 512
"""A 1024 x 1024 uint16 image of 256 x 256 tiles (128 KiB: 32 memory pages, so nearly every
tile holds a boundary between two of the batches the kernel copies a read in), 4 shards."""
SECONDS = 12.0
"""How long the programs save and the readers read."""

SAVER = textwrap.dedent("""
    import io, random, sys, time
    import numpy as np, tifffile
    mnt, first, seconds, grid = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    rng, version, stop = random.Random(first), first, time.monotonic() + seconds
    while time.monotonic() < stop:
        row, col = rng.randrange(grid), rng.randrange(grid)
        out = io.BytesIO()
        tifffile.imwrite(out, np.full(({tile}, {tile}), version, "u2"))
        with open(f"{{mnt}}/planes/y{{row:03d}}/y{{row:03d}}-x{{col:03d}}.tiff", "wb") as f:
            f.write(out.getvalue())
        version += 2
    print(version)
""").format(tile=TILE)
"""One program saving tiles: versions ``first``, ``first + 2``, ... (odd for one program,
even for the other), each a whole tile of that number, at random places."""


def _tile_offsets(path: Path) -> list[int]:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        assert page.tilewidth == page.tilelength == TILE
        return [int(o) for o in page.dataoffsets]


def _read_whole(fd: int, size: int) -> bytes:
    """The file in one read() (a short read is read on: the kernel may stop early)."""
    data = os.pread(fd, size, 0)
    assert len(data) == size, f"read {len(data)} of {size} bytes"
    return data


def _torn(data: bytes, offsets: list[int]) -> list[tuple[int, list[int]]]:
    """The tiles that hold more than one version: (index, the first value of each eighth
    of their rows)."""
    nbytes = TILE * TILE * 2
    out = []
    for index, offset in enumerate(offsets):
        tile = np.frombuffer(data, "<u2", TILE * TILE, offset).reshape(TILE, TILE)
        if (tile != tile[0, 0]).any():
            rows = [int(tile[r, 0]) for r in range(0, TILE, TILE // 8)]
            out.append((index, rows))
    assert all(o + nbytes <= len(data) for o in offsets)
    return out


def test_no_tile_read_mixes_two_saves(tmp_path):
    store = tmp_path / "img"
    zarr.create_array(store, shape=(SIDE, SIDE), dtype="u2", chunks=(TILE, TILE),
                      shards=(SHARD, SHARD), fill_value=0, dimension_names=("y", "x"))
    with (mounted(store, tmp_path / "tiles", "--format", "tiff") as tiles,
          mounted(store, tmp_path / "whole", "--read-only", "--format", "ome-tiff") as whole):
        image = whole / "img.ome.tif"
        offsets = _tile_offsets(image)
        size = image.stat().st_size
        stop = threading.Event()
        reads, torn, errors = [0], [], []

        def reader(reopen: int) -> None:
            """Reads the file whole in one read(), opening it again every ``reopen`` reads
            (0: never)."""
            fd = os.open(image, os.O_RDONLY)
            try:
                while not stop.is_set():
                    if reopen and reads[0] % reopen == 0:
                        os.close(fd)
                        fd = os.open(image, os.O_RDONLY)
                    for index, versions in _torn(_read_whole(fd, size), offsets):
                        torn.append((reads[0], index, versions))
                    reads[0] += 1
            except BaseException as e:  # noqa: BLE001  (reported by the test)
                errors.append(e)
            finally:
                os.close(fd)

        threads = [threading.Thread(target=reader, args=(reopen,), daemon=True)
                   for reopen in (1, 7, 0)]
        savers = [subprocess.Popen(
            [sys.executable, "-c", SAVER, str(tiles), str(first), str(SECONDS),
             str(SIDE // TILE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for first in (1, 2)]
        try:
            for thread in threads:
                thread.start()
            saved = []
            for saver in savers:
                out, err = saver.communicate(timeout=SECONDS + 60)
                assert saver.returncode == 0, err
                saved.append((int(out) - 1) // 2)
        finally:
            stop.set()
            for saver in savers:
                if saver.poll() is None:
                    saver.kill()
            for thread in threads:
                thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads), "a reader is stuck"
        assert not errors, errors
        # The last save of each tile shows once the watch has passed it on: the mount
        # follows the store at all.
        assert wait_for(lambda: _torn(image.read_bytes(), offsets) == [], 5.0)
        final = zarr.open_array(store, mode="r")[...]
        assert wait_for(lambda: np.array_equal(tifffile.imread(image), final), 5.0)
    assert min(saved) > 20, f"too few saves to tell: {saved}"
    assert reads[0] > 20, f"too few reads to tell: {reads[0]}"
    assert not torn, (f"{len(torn)} torn tiles in {reads[0]} reads of {sum(saved)} saves: "
                      f"{torn[:5]}")
