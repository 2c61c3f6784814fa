"""Batches ask for their mount's fetch pool from several worker threads at once: one pool is
made, and the mount's close shuts it."""

from __future__ import annotations

import threading

from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.recently_used import FOR_EVER


class _Backend:
    def close(self) -> None:
        pass


def test_threads_asking_at_once_get_one_pool():
    context = MountContext(_Backend(), FOR_EVER)  # type: ignore[arg-type]
    start, got = threading.Barrier(16), []

    def ask() -> None:
        start.wait()
        got.append(context.fetch_pool())

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(pool) for pool in got}) == 1
    context.close()
    assert got[0]._shutdown
