"""The filesystem's one cache class: bounds, order, TTL and the eviction hook."""

from __future__ import annotations

import time

from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed, Trust


def test_least_recently_used_leaves_first_within_the_weight_limit():
    evicted: list[bytes] = []
    cache: RecentlyUsed[str, bytes] = RecentlyUsed(10, weigh=len, on_evict=evicted.append)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"  # now b is the least recently used
    cache.put("c", b"cccc")
    assert evicted == [b"bbbb"] and cache.get("b") is None
    assert cache.get("a") == b"aaaa" and cache.get("c") == b"cccc"
    cache.put("huge", b"x" * 11)  # heavier than the whole limit: not kept, nothing evicted
    assert cache.get("huge") is None and evicted == [b"bbbb"]
    cache.put("a", b"a")  # replaced: no hook, the weight follows
    cache.put("d", b"dddd")
    assert evicted == [b"bbbb"] and len(cache) == 3


def test_entries_older_than_the_ttl_are_gone_and_handed_to_the_hook():
    evicted: list[int] = []
    cache: RecentlyUsed[str, int] = RecentlyUsed(5, trust=Trust(0.05), on_evict=evicted.append)
    cache.put("old", 1, at=time.monotonic() - 1)
    cache.put("new", 2)
    assert cache.get("old") is None and evicted == [1]
    assert cache.get("new") == 2
    time.sleep(0.06)
    assert cache.get("new") is None and evicted == [1, 2]


def test_entries_past_the_ttl_stay_while_they_are_trusted_another_way():
    """A writable mount's listings while its store watch tells every change: kept past the
    TTL, and gone once the watch stops telling."""
    trusted = [True]
    cache: RecentlyUsed[str, int] = RecentlyUsed(5, trust=Trust(0.05, lambda: trusted[0]))
    cache.put("listing", 1, at=time.monotonic() - 1)
    assert cache.get("listing") == 1
    trusted[0] = False
    assert cache.get("listing") is None


def test_drop_forgets_without_the_hook():
    evicted: list[int] = []
    cache: RecentlyUsed[str, int] = RecentlyUsed(2, on_evict=evicted.append)
    cache.put("a", 1)
    assert cache.drop("a") == 1 and cache.drop("a") is None
    assert evicted == [] and len(cache) == 0
