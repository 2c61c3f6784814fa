"""The filesystem's one cache class: bounds, order, TTL and the eviction hook."""

from __future__ import annotations

import pytest

from zarrfuse.filesystem.chunks.recently_used import (
    CHANGES_REMEMBERED,
    DROPS_REMEMBERED,
    RecentlyUsed,
    Trust,
)


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


@pytest.fixture
def clock() -> list[float]:
    """The caches' clock (``Trust.clock``), set by the test: ``clock[0]`` is now."""
    return [1000.0]


def test_entries_older_than_the_ttl_are_gone_and_handed_to_the_hook(clock):
    evicted: list[int] = []
    cache: RecentlyUsed[str, int] = RecentlyUsed(
        5, trust=Trust(0.5, clock=lambda: clock[0]), on_evict=evicted.append)
    cache.put("old", 1, at=clock[0] - 1)
    cache.put("new", 2)
    assert cache.get("old") is None and evicted == [1]
    clock[0] += 0.375  # binary fractions: the sums are exact
    assert cache.get("new") == 2
    clock[0] += 0.125  # the TTL to the tick
    assert cache.get("new") is None and evicted == [1, 2]


def test_entries_past_the_ttl_stay_while_they_are_trusted_another_way(clock):
    """A writable mount's listings while its store watch tells every change: kept past the
    TTL, and gone once the watch stops telling."""
    trusted = [True]
    watched_since = clock[0] - 2
    cache: RecentlyUsed[str, int] = RecentlyUsed(
        5, trust=Trust(0.05, lambda at: trusted[0] and at >= watched_since, lambda: clock[0]))
    cache.put("listing", 1, at=clock[0] - 1)
    cache.put("before the watch", 2, at=clock[0] - 3)
    assert cache.get("listing") == 1
    assert cache.get("before the watch") is None  # it may have changed unseen: the TTL
    trusted[0] = False
    assert cache.get("listing") is None


def test_drop_forgets_without_the_hook():
    evicted: list[int] = []
    cache: RecentlyUsed[str, int] = RecentlyUsed(2, on_evict=evicted.append)
    cache.put("a", 1)
    assert cache.drop("a") == 1 and cache.drop("a") is None
    assert evicted == [] and len(cache) == 0


def test_an_answer_asked_before_a_change_to_its_key_is_not_kept():
    cache: RecentlyUsed[str, int] = RecentlyUsed(10)
    for change in (lambda: cache.drop("a"), lambda: cache.changed("a"), cache.clear,
                   lambda: cache.put("a", 2)):  # a value put without a ticket: just made
        cache.drop("a")
        ticket = cache.ticket()
        change()
        kept = cache.get("a")
        assert cache.put("a", 1, ticket=ticket) is False
        assert cache.get("a") == kept
    ticket = cache.ticket()
    cache.drop("b")  # another key's change
    assert cache.put("a", 1, ticket=ticket) is True and cache.get("a") == 1


def test_an_answer_asked_before_forgotten_changes_is_not_kept():
    """The last change of only CHANGES_REMEMBERED keys is remembered: an answer older than
    a change forgotten may be older than its own key's, and is asked again."""
    cache: RecentlyUsed[str, int] = RecentlyUsed(10)
    ticket = cache.ticket()
    for n in range(CHANGES_REMEMBERED):
        cache.drop(str(n))
    assert cache.put("a", 1, ticket=ticket) is True  # every change since is remembered
    cache.drop("one more")  # the first change is forgotten
    assert cache.put("b", 1, ticket=ticket) is False
    assert cache.put("b", 1, ticket=cache.ticket()) is True


def test_drop_where_forgets_one_owners_entries_as_drop_does():
    evicted: list[int] = []
    cache: RecentlyUsed[tuple[str, int], int] = RecentlyUsed(10, on_evict=evicted.append)
    for owner, n in (("a", 1), ("a", 2), ("b", 1)):
        cache.put((owner, n), n)
    ticket = cache.ticket()
    assert sorted(cache.drop_where(lambda key: key[0] == "a")) == [(("a", 1), 1), (("a", 2), 2)]
    assert cache.get(("a", 1)) is None and cache.get(("b", 1)) == 1 and evicted == []
    assert cache.put(("a", 1), 9, ticket=ticket) is False  # asked before: refused
    assert cache.put(("b", 2), 9, ticket=ticket) is True


def test_drop_where_refuses_answers_asked_before_it_for_keys_it_did_not_hold():
    """An open under way when a store directory went, of a chunk not kept yet, is as old as
    the chunks dropped then: it must not be kept after them."""
    cache: RecentlyUsed[tuple[str, int], int] = RecentlyUsed(10)
    ticket = cache.ticket()
    assert cache.drop_where(lambda key: key[0] == "a") == []  # nothing of "a" kept yet
    assert cache.put(("a", 7), 1, ticket=ticket) is False
    assert cache.put(("b", 7), 1, ticket=ticket) is True  # another owner's answer
    assert cache.put(("a", 7), 1, ticket=cache.ticket()) is True  # asked after: kept


def test_drop_where_past_the_ones_remembered_refuses_older_answers_whatever_their_key():
    cache: RecentlyUsed[tuple[str, int], int] = RecentlyUsed(10)
    ticket = cache.ticket()
    for _ in range(DROPS_REMEMBERED):
        cache.drop_where(lambda key: key[0] == "a")
    assert cache.put(("b", 1), 1, ticket=ticket) is True
    cache.drop_where(lambda key: key[0] == "a")  # the first is forgotten
    assert cache.put(("b", 2), 1, ticket=ticket) is False  # asked again, never kept wrong
