"""fsx-style random I/O with memory mapping on one chunk file of a real mount, against a model.

One process keeps a chunk file open read-write and does random operations on it: ``pwrite``
and ``pread`` at random offsets and lengths, reads and writes through a ``MAP_SHARED``
mapping of the whole file (``msync`` after writing), ``fsync`` (which stores the chunk), and
closing and opening the file again (close stores it too). A model holds what the file must
hold; every read, through the file or the mapping, is compared with it, and after each store
(and at the end) so are the store's own bytes. The chunk's size is fixed (a raw ``bytes``
array stores exactly one size), so there is no truncate.

Used by the torture tier (``tests/fuse/test_mount_torture.py``, a few hundred operations)
and by ``python -m bench run torture`` (10,000 operations per seed, as fsx's runs).
"""

from __future__ import annotations

import mmap
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

__all__ = ["OPERATIONS", "run_fsx"]

OPERATIONS = ("pwrite", "pread", "map_read", "map_write", "fsync", "reopen")
_WEIGHTS = (30, 30, 15, 15, 5, 5)


class _File:
    """The chunk file, open read-write, and its shared mapping."""

    def __init__(self, path: Path, size: int) -> None:
        self.fd = os.open(path, os.O_RDWR)
        self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


def run_fsx(
    chunk: Path, stored: Callable[[], bytes], operations: int, seed: int
) -> Counter[str]:
    """``operations`` random operations on ``chunk`` (a file of a mount); ``stored`` reads the
    chunk's bytes from the store itself. Counts of each operation, ``wrong`` (a read or a
    stored value that differs from the model) and ``errors``."""
    rng = random.Random(seed)
    model = bytearray(chunk.read_bytes())
    size = len(model)
    counts: Counter[str] = Counter()
    handle = _File(chunk, size)
    try:
        for _ in range(operations):
            op = rng.choices(OPERATIONS, _WEIGHTS)[0]
            start = rng.randrange(size)
            length = rng.randint(1, min(size - start, 1 << rng.randint(0, 14)))
            counts[op] += 1
            try:
                if op == "pwrite":
                    data = rng.randbytes(length)
                    os.pwrite(handle.fd, data, start)
                    model[start : start + length] = data
                elif op == "pread":
                    counts["wrong"] += os.pread(handle.fd, length, start) != model[
                        start : start + length]
                elif op == "map_read":
                    counts["wrong"] += handle.map[start : start + length] != model[
                        start : start + length]
                elif op == "map_write":
                    data = rng.randbytes(length)
                    handle.map[start : start + length] = data
                    handle.map.flush()
                    model[start : start + length] = data
                elif op == "fsync":
                    handle.map.flush()
                    os.fsync(handle.fd)
                    counts["wrong"] += stored() != model
                else:  # reopen: close stores the chunk
                    handle.close()
                    counts["wrong"] += stored() != model
                    handle = _File(chunk, size)
            except OSError as e:
                counts["errors"] += 1
                counts[f"error.{op}.{e.errno}"] += 1
    finally:
        handle.close()
    counts["wrong"] += stored() != model
    counts["wrong"] += chunk.read_bytes() != model
    counts["ops"] = operations
    return counts
