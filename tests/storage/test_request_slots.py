"""The mount's one bound on requests in flight (issue 32, point 1): however many threads
want a remote store at once, it sees no more requests than the bound, and the others go out
as slots free up. Counted at a proxy that holds every request while stalled."""

from __future__ import annotations

import threading
import time

import pytest
from zarr.storage import FsspecStore

from tests.http_servers import nginx
from tests.stall_proxy import StallProxy
from zarrfuse.storage import request_slots
from zarrfuse.storage.stores import StoreBackend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def two_slots():
    request_slots.limit_requests(2)
    try:
        yield
    finally:
        request_slots.limit_requests(request_slots.REQUESTS_IN_FLIGHT)


def test_a_stalled_store_sees_no_more_requests_than_the_slots(tmp_path, two_slots):
    for i in range(6):
        (tmp_path / "www" / "k").mkdir(parents=True, exist_ok=True)
        (tmp_path / "www" / "k" / str(i)).write_bytes(bytes([i]) * 100)
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            StallProxy(int(url.rsplit(":", 1)[1])) as proxy:
        backend = StoreBackend(FsspecStore.from_url(f"{proxy.url}/k", read_only=True))
        got: dict[int, bytes] = {}
        proxy.stall()
        threads = [threading.Thread(
            target=lambda i=i: got.__setitem__(i, backend.read_range(str(i), 0, 100)))
            for i in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # every thread has had time to send its request, were it let
        connections = proxy.connections()
        proxy.resume()
        for thread in threads:
            thread.join(30)
    assert connections <= 2, connections
    assert got == {i: bytes([i]) * 100 for i in range(6)}
