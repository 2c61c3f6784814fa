"""Batches ask for the fetch pool from several worker threads at once: one pool is made."""

from __future__ import annotations

import threading

from zarrfuse.filesystem.chunks import fetch_pool as module


def test_threads_asking_at_once_get_one_pool(monkeypatch):
    monkeypatch.setattr(module, "_pool", [])
    start, got = threading.Barrier(16), []

    def ask() -> None:
        start.wait()
        got.append(module.fetch_pool())

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(pool) for pool in got}) == 1 and len(module._pool) == 1
    got[0].shutdown()
