"""Two mounts in one process share nothing (issue 53 point 3): no pool, cache, bound or
counter of one is the other's, whether held by the mount's objects or by a module global
their code reads (a module global is reached through a function's ``__globals__``)."""

from __future__ import annotations

import functools
import gc
import itertools
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import trio
import zarr

from tests.inprocess import in_process
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed
from zarrfuse.storage.store_requests import StoreRequests

STATE = (ThreadPoolExecutor, trio.CapacityLimiter, RecentlyUsed, Counters, StoreRequests,
         itertools.count)
"""What holds a mount's state: pools, bounds, caches, counters, clients, numbering."""
FOLLOWED = (dict, list, tuple, set, frozenset, types.MethodType, types.CellType,
            functools.partial)


def _state(root: object) -> dict[int, object]:
    """Every state-holding object reachable from ``root`` through the package's objects."""
    found: dict[int, object] = {}
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, STATE):
            found[id(obj)] = obj
        ours = type(obj).__module__.startswith("zarrfuse") or (
            isinstance(obj, types.FunctionType) and obj.__module__.startswith("zarrfuse"))
        if ours or isinstance(obj, FOLLOWED + STATE):
            todo.extend(gc.get_referents(obj))
    return found


def test_two_mounts_in_one_process_share_no_pool_cache_bound_or_counter(tmp_path):
    data = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    zarr.create_array(tmp_path / "a.zarr", shape=(64, 64), chunks=(16, 16), shards=(32, 32),
                      dtype="u2", fill_value=0)[...] = data
    source = str(tmp_path / "a.zarr")
    with in_process(source, format="tiff", read_only=True) as one, \
            in_process(source, format="tiff", read_only=True) as two:
        for fs in (one, two):  # both busy: caches filled, pools and bounds used
            tiles = sorted(fs.walk())
            assert tiles and all(fs.read(tile) for tile in tiles)
        first, second = _state(one.fs), _state(two.fs)
    shared = [type(obj).__name__ for key, obj in first.items() if key in second]
    assert not shared, shared
    kinds = {type(obj) for obj in first.values()}
    assert trio.CapacityLimiter in kinds and Counters in kinds  # the walk found the state
