"""Read-ahead decisions (zarrfuse.storage.prefetch) against an in-memory object: which ranges are
fetched for sequential and random reads, and that the bytes are right either way."""

from __future__ import annotations

import errno
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarrfuse.storage.prefetch import PrefetchBudget, ReadAhead, ReadAheadPolicy

KiB = 1 << 10
OBJECT = bytes(range(256)) * 4096  # 1 MiB


class Remote:
    """An object served from memory, recording every ranged fetch; can be made to fail."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.fetches: list[tuple[int, int]] = []
        self.failing = False
        self._lock = threading.Lock()

    def fetch(self, start: int, stop: int) -> bytes:
        with self._lock:
            self.fetches.append((start, stop))
        if self.failing:
            raise OSError(errno.EIO, "server down")
        return self.data[start:stop]


@pytest.fixture
def pool():
    with ThreadPoolExecutor(4) as executor:
        yield executor


def reader(remote: Remote, pool, budget: int = 1 << 30) -> ReadAhead:
    policy = ReadAheadPolicy(
        pool=pool, budget=PrefetchBudget(budget), window=128 * KiB, depth=3, timeout=10
    )
    return ReadAhead(remote.fetch, len(remote.data), policy)


def read(ahead: ReadAhead, start: int, n: int) -> bytes:
    out = bytearray(min(n, len(OBJECT) - start))
    done = ahead.read_nowait(start, memoryview(out))
    if done < len(out):
        ahead.read(start + done, memoryview(out)[done:])
    return bytes(out)


def test_sequential_reads_fetch_windows_ahead(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    got = b"".join(read(ahead, at, 32 * KiB) for at in range(0, len(OBJECT), 32 * KiB))
    assert got == OBJECT
    # The first read alone; then windows that double from one read (32 KiB) up to 128 KiB,
    # each byte fetched once: 11 fetches instead of 32 reads.
    assert remote.fetches[0] == (0, 32 * KiB)
    sizes = [(stop - start) // KiB for start, stop in sorted(remote.fetches)]
    assert sizes == [32, 32, 64, 64, 128, 128, 128, 128, 128, 128, 64]


def test_reading_to_the_end_gives_the_budget_back_before_close(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    got = b"".join(read(ahead, at, 32 * KiB) for at in range(0, len(OBJECT), 32 * KiB))
    assert got == OBJECT
    pool.shutdown(wait=True)  # any GET still running has ended and given its bytes back
    assert ahead.policy.budget.used == 0


def test_two_reads_in_a_row_fetch_little_ahead(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    read(ahead, 0, 4 * KiB)
    read(ahead, 4 * KiB, 4 * KiB)  # like ``head``: sequential, then it stops
    ahead.close()
    assert sum(stop - start for start, stop in remote.fetches) <= 8 * KiB + 2 * 4 * KiB


def test_random_reads_fetch_exactly_their_range(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    for start in (700 * KiB, 10, 300 * KiB, 900 * KiB):
        assert read(ahead, start, 4 * KiB) == OBJECT[start : start + 4 * KiB]
    assert remote.fetches == [(s, s + 4 * KiB) for s in (700 * KiB, 10, 300 * KiB, 900 * KiB)]


def test_a_seek_drops_the_windows_and_gives_back_the_budget(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    read(ahead, 0, 4 * KiB)
    read(ahead, 4 * KiB, 4 * KiB)  # sequential: windows go out
    assert ahead.policy.budget.used > 0
    assert read(ahead, 800 * KiB, 4 * KiB) == OBJECT[800 * KiB : 804 * KiB]
    assert ahead.policy.budget.used == 0
    assert remote.fetches[-1] == (800 * KiB, 804 * KiB)


def test_budget_bounds_what_is_fetched_ahead(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool, budget=128 * KiB)  # room for one window
    got = b"".join(read(ahead, at, 64 * KiB) for at in range(0, len(OBJECT), 64 * KiB))
    assert got == OBJECT
    assert ahead.policy.budget.used <= 128 * KiB


def test_failed_fetch_is_an_error_and_the_next_read_asks_again(pool):
    remote = Remote(OBJECT)
    ahead = reader(remote, pool)
    read(ahead, 0, 4 * KiB)
    remote.failing = True
    with pytest.raises(OSError) as raised:
        read(ahead, 4 * KiB, 4 * KiB)
    assert raised.value.errno == errno.EIO
    remote.failing = False
    assert read(ahead, 8 * KiB, 4 * KiB) == OBJECT[8 * KiB : 12 * KiB]
    ahead.close()
    assert ahead.policy.budget.used == 0


def test_an_object_shorter_than_listed_is_eio_not_a_crash():
    """A reader opened with a listed size larger than the object (replaced by a shorter one
    behind a --metadata-ttl mount) gets EIO from the ranged GET itself."""
    from obstore.store import MemoryStore  # noqa: PLC0415  (only this test needs obstore)

    from zarrfuse.storage.objects import ObjectBackend  # noqa: PLC0415  (as above)

    backend = ObjectBackend(MemoryStore())
    try:
        backend.write("k", [memoryview(b"0123456789")])
        assert bytes(backend.read_range("k", 2, 5)) == b"234"
        with pytest.raises(OSError) as raised:
            backend.read_range("k", 0, 20)
        assert raised.value.errno == errno.EIO
    finally:
        backend.close()


def test_dropping_a_window_being_fetched_keeps_its_bytes_counted_until_it_ends():
    started, release = threading.Event(), threading.Event()

    def slow_fetch(start: int, stop: int) -> bytes:
        if start >= 64 * KiB:  # windows fetched ahead; the first read is served at once
            started.set()
            release.wait(10)
        return OBJECT[start:stop]

    pool = ThreadPoolExecutor(1)
    budget = PrefetchBudget(8 << 20)
    policy = ReadAheadPolicy(pool=pool, budget=budget, window=256 * KiB, depth=2, timeout=10)
    ahead = ReadAhead(slow_fetch, len(OBJECT), policy)
    try:
        out = bytearray(64 * KiB)
        ahead.read_nowait(0, memoryview(out))  # first read: not sequential
        ahead.read(0, memoryview(out))
        ahead.read_nowait(64 * KiB, memoryview(out))  # sequential: windows start
        assert started.wait(10)
        ahead.close()  # drops the window whose GET is running
        assert budget.used > 0
        release.set()
        pool.shutdown(wait=True)
        assert budget.used == 0
    finally:
        release.set()
        pool.shutdown(wait=True)
