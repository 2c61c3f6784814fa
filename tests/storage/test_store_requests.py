"""The mount's store requests (issue 32, points 1 and 6): however many threads want a
remote store at once, and whatever sends the requests (a reader's thread, or fetches made
ahead, which no thread waits on), the store sees no more requests than the one bound, and the
others go out as slots free up; a request without an answer within ``--store-timeout`` is
EIO. Counted at a proxy that holds every request while stalled."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from zarr.storage import ObjectStore

from tests.deadlines import answered
from tests.http_servers import nginx
from tests.stall_proxy import StallProxy
from zarrfuse.api.arrays import open_store_path
from zarrfuse.storage.objects import ObjectBackend
from zarrfuse.storage.store_requests import REQUESTS_IN_FLIGHT, StoreRequests
from zarrfuse.zarr_compat import sync

pytestmark = pytest.mark.timeout(60)


BIG = bytes(range(256)) * (24 << 12)  # 24 MiB


def _backend(url: str, slots: int = REQUESTS_IN_FLIGHT) -> ObjectBackend:
    """The backend of the web server's ``k`` at ``url`` (obstore's HTTP store), its store
    client bounded to ``slots`` requests in flight."""
    store_path = sync(open_store_path(f"{url}/k", mode="r"))
    assert isinstance(store_path.store, ObjectStore)
    return ObjectBackend(store_path.store.store, requests=StoreRequests(limit=slots))


@pytest.fixture
def stalling(tmp_path: Path) -> Iterator[tuple[StallProxy, ObjectBackend]]:
    """A web server of six keys ``0``..``5`` behind a proxy that can stall, and a backend."""
    for i in range(6):
        (tmp_path / "www" / "k").mkdir(parents=True, exist_ok=True)
        (tmp_path / "www" / "k" / str(i)).write_bytes(bytes([i]) * 100)
    (tmp_path / "www" / "k" / "big").write_bytes(BIG)
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            StallProxy(int(url.rsplit(":", 1)[1])) as proxy:
        yield proxy, _backend(proxy.url)


@pytest.fixture
def two_slots(stalling: tuple[StallProxy, ObjectBackend]) -> tuple[StallProxy, ObjectBackend]:
    """The stalling proxy, and a backend of it whose store client has two slots."""
    return stalling[0], _backend(stalling[0].url, 2)


def test_a_stalled_store_sees_no_more_requests_than_the_slots(two_slots):
    proxy, backend = two_slots
    got: dict[int, bytes] = {}
    proxy.stall()
    threads = [threading.Thread(
        target=lambda i=i: got.__setitem__(i, backend.read_range(str(i), 0, 100)))
        for i in range(6)]
    for thread in threads:
        thread.start()
    _queued(backend, 4)  # two requests hold the slots, four wait for one
    connections = proxy.connections()
    proxy.resume()
    for thread in threads:
        thread.join(30)
    assert connections <= 2, connections
    assert got == {i: bytes([i]) * 100 for i in range(6)}


def test_fetches_made_ahead_take_slots_and_no_thread_each(two_slots):
    proxy, backend = two_slots
    proxy.stall()
    threads_before = _threads()
    backend.prefetch_objects([(str(i), None) for i in range(6)])
    _queued(backend, 4)
    connections, threads = proxy.connections(), _threads()
    proxy.resume()
    assert connections <= 2, connections
    assert len(threads) <= len(threads_before) + 1, (threads_before, threads)  # the loop's
    assert [backend.read_range(str(i), 0, 100) for i in range(6)] == [
        bytes([i]) * 100 for i in range(6)]
    assert proxy.connections() <= 2  # every answer came from the GETs sent ahead


def _queued(backend: ObjectBackend, waiting: int) -> None:
    """Waits until ``waiting`` requests wait for a slot of the store's bound (a bound that
    let them through would never queue them: this fails at its deadline)."""
    ends = time.monotonic() + 10
    while time.monotonic() < ends:
        waiters = backend.requests._slots and backend.requests._slots._waiters
        if len(waiters or ()) >= waiting:
            return
        time.sleep(0.01)
    raise AssertionError(f"{waiting} requests never waited for a slot")


def _threads() -> list[str]:
    """This process's threads but the proxy's (two per connection)."""
    return [t.name for t in threading.enumerate() if "(_pump)" not in t.name]


def test_a_request_without_an_answer_within_the_timeout_is_eio(stalling):
    proxy, backend = stalling
    # The bound is the deadline handed to the store client; what shows it was applied is
    # the answer (EIO, the timeout named in the reason). The stall lasts until resumed, so
    # without the bound the read never returns: the hang guard, far above, fails it.
    backend.requests.timeout = 1.0
    try:
        proxy.stall()
        with pytest.raises(OSError) as raised:
            answered(lambda: backend.read_range("0", 0, 100), "a read of a stalled store")
    finally:
        proxy.resume()
    assert raised.value.errno == errno.EIO
    assert "no answer within 1 s (--store-timeout)" in str(raised.value)
    assert backend.read_range("0", 0, 100) == bytes([0]) * 100


def test_sequential_reads_get_windows_ahead_with_no_thread_each(stalling):
    """A large file read from start to end, as cp reads it: windows ahead of the reads are
    sent as store requests, not run on a pool of threads, and every byte is exact."""
    _, backend = stalling
    threads_before = _threads()
    reader = backend.open_reader(["big"])
    got, at = bytearray(), 0
    try:
        while at < len(BIG):
            piece = memoryview(bytearray(min(1 << 20, len(BIG) - at)))
            done = reader.read_into_nowait(0, at, piece)
            if done < len(piece):
                reader.read_into(0, at + done, piece[done:])
            got += piece
            at += len(piece)
            threads = _threads()
    finally:
        reader.close()
    assert bytes(got) == BIG
    assert len(threads) <= len(threads_before) + 1, (threads_before, threads)  # the loop's
    assert not any(name.startswith("zarrfuse-ahead") for name in threads), threads


def test_two_mounts_in_one_process_take_no_slot_of_each_other(stalling):
    """Each mount has its store client (issue 52, point 5): one whose store stalls with
    every slot taken leaves another mount's requests free to go."""
    proxy, _ = stalling
    stalled = _backend(proxy.url, 1)
    with StallProxy(proxy.upstream_port) as other_proxy, ThreadPoolExecutor(2) as pool:
        other = _backend(other_proxy.url, 1)
        proxy.stall()
        waiting = pool.submit(stalled.read_range, "0", 0, 100)
        try:
            ends = time.monotonic() + 10  # the stalled mount's one slot is taken
            while proxy.connections() < 1 and time.monotonic() < ends:
                time.sleep(0.01)
            assert pool.submit(other.read_range, "1", 0, 100).result(10) == bytes([1]) * 100
        finally:
            proxy.resume()
        assert waiting.result(30) == bytes([0]) * 100
        other.close()
