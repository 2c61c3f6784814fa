"""The mapped-files load of issue 34: readers, mappers of every kind and writers on the same
chunk files of a real mount, counting wrong reads, torn commits, errors and deaths.

Used by the torture tier (``tests/fuse/test_mount_torture.py``, a few seconds) and by
``python -m bench run torture`` (full size). Every value a writer writes is one byte repeated over
the whole chunk (1..255, never 0), so any read or mapping that is not one byte repeated over
exactly the chunk's length is a wrong read: a mix of two versions, zeros nobody wrote, a
short or empty file.
"""

from __future__ import annotations

import mmap
import multiprocessing
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["CHUNK_BYTES", "ROLES", "LoadResult", "make_array", "run_load", "stored_values"]

CHUNK_BYTES = 64 << 10
ROLES = ("reader", "private_mapper", "shared_mapper", "rw_mapper", "rw_mmap", "cp_writer")


def make_array(path: Path, chunks: int = 2) -> list[str]:
    """A raw uint8 array of ``chunks`` chunks, each one byte (1) repeated; the chunk files'
    names in the default view."""
    import zarr  # noqa: PLC0415  (the harness's workers import only what they use)
    from zarr.codecs import BytesCodec  # noqa: PLC0415

    array = zarr.create_array(path, shape=(chunks * CHUNK_BYTES,), chunks=(CHUNK_BYTES,),
                              dtype="u1", fill_value=0, serializer=BytesCodec(),
                              compressors=None)
    array[:] = 1
    return [f"c/{i // 1000}/{i % 1000:03d}" for i in range(chunks)]


def _whole(data: bytes | np.ndarray) -> bool:
    """One byte (not 0) repeated over exactly a chunk."""
    view = np.frombuffer(data, dtype="u1") if isinstance(data, bytes) else data
    return len(view) == CHUNK_BYTES and view[0] != 0 and bool((view == view[0]).all())


def _value(rng: random.Random) -> int:
    return rng.randrange(1, 256)


def _one(role: str, path: str, rng: random.Random) -> bool:
    """One operation of ``role`` on ``path``; whether what it saw was right."""
    if role == "reader":
        with open(path, "rb") as f:
            pieces = []
            while piece := f.read(16 << 10):
                pieces.append(piece)
        return _whole(b"".join(pieces))
    if role == "private_mapper":
        m = np.memmap(path, dtype="u1", mode="c")
        ok = _whole(m)
        m[:2] = 0  # its own copy only
        ok = ok and bool((m[2:] == m[2]).all()) and m[2] != 0
        del m
        return ok
    if role == "shared_mapper":
        m = np.memmap(path, dtype="u1", mode="r")
        ok = _whole(m)
        del m
        return ok
    value = _value(rng)
    if role == "rw_mapper":
        m = np.memmap(path, dtype="u1", mode="r+", shape=(CHUNK_BYTES,))
        ok = _whole(m)
        m[:] = value
        m.flush()
        ok = ok and bool((m == value).all())
        del m
        return ok
    if role == "rw_mmap":
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            ok = _whole(m[:])
            m[:] = bytes([value]) * CHUNK_BYTES
            m.flush()
            ok = ok and m[:] == bytes([value]) * CHUNK_BYTES
        return ok
    if role == "cp_writer":  # O_TRUNC, then the value in two writes, as cp's loop does
        with open(path, "wb") as f:
            f.write(bytes([value]) * (CHUNK_BYTES // 2))
            f.flush()
            f.write(bytes([value]) * (CHUNK_BYTES // 2))
        return True
    raise ValueError(role)


def _worker(role: str, paths: list[str], seconds: float, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            right = _one(role, rng.choice(paths), rng)
        except OSError as e:
            counts[f"{role}.error.{e.errno}"] += 1
            continue
        except ValueError as e:  # numpy: "cannot mmap an empty file", a size that changed
            counts[f"{role}.error.{type(e).__name__}: {e}"] += 1
            continue
        counts[f"{role}.ops"] += 1
        if not right:
            counts[f"{role}.wrong"] += 1
    return counts


def _process_main(role: str, paths: list[str], seconds: float, seed: int, out) -> None:
    out.put(dict(_worker(role, paths, seconds, seed)))


def _threads_main(plan: list[tuple[str, int]], paths: list[str], seconds: float, out) -> None:
    totals: Counter[str] = Counter()
    lock = threading.Lock()

    def run(role: str, seed: int) -> None:
        counts = _worker(role, paths, seconds, seed)
        with lock:
            totals.update(counts)

    threads = [threading.Thread(target=run, args=(role, seed)) for role, seed in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(dict(totals))


class LoadResult:
    """Counts of a load run: operations, wrong reads, errors per role, and deaths."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.deaths: list[int] = []
        """Exit codes of workers that died (-7: SIGBUS)."""

    def total(self, what: str) -> int:
        return sum(n for key, n in self.counts.items() if key.split(".")[1] == what)

    def errors(self) -> dict[str, int]:
        return {key: n for key, n in self.counts.items() if ".error." in key}

    def __str__(self) -> str:
        return (f"ops {self.total('ops')}, wrong {self.total('wrong')}, errors "
                f"{self.errors() or 0}, deaths {self.deaths or 0}; "
                + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))


def run_load(
    mnt: Path, names: list[str], seconds: float, workers: dict[str, int], *,
    threads: bool = False,
) -> LoadResult:
    """Run ``workers`` (role -> how many) for ``seconds`` on the chunk files ``names`` of
    the mount ``mnt``: each worker its own process, or all as threads of one process."""
    ctx = multiprocessing.get_context("spawn")
    paths = [str(mnt / name) for name in names]
    out = ctx.Queue()
    plan = [(role, 1000 * i + n) for i, role in enumerate(ROLES)
            for n in range(workers.get(role, 0))]
    start: Callable[..., multiprocessing.process.BaseProcess] = ctx.Process
    if threads:
        procs = [start(target=_threads_main, args=(plan, paths, seconds, out))]
    else:
        procs = [start(target=_process_main, args=(role, paths, seconds, seed, out))
                 for role, seed in plan]
    for proc in procs:
        proc.start()
    result = LoadResult()
    for proc in procs:
        proc.join(seconds + 120)
        if proc.is_alive():
            proc.kill()
            proc.join()
        if proc.exitcode != 0:
            result.deaths.append(proc.exitcode if proc.exitcode is not None else -9)
    while not out.empty():
        result.counts.update(out.get(timeout=5))
    for name in list(result.counts):
        if name.split(".")[0] not in ROLES:
            raise AssertionError(name)
    return result


def stored_values(store: Path, names: list[str]) -> list[bool]:
    """Whether each chunk as stored is one writer's whole value."""
    import zarr  # noqa: PLC0415

    array = zarr.open_array(store, mode="r")
    return [_whole(array[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES]) for i in range(len(names))]

