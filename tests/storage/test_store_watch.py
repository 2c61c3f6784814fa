"""The store watch's state (issue 35, point 1): a writable mount keeps chunk files long only
while it is told every change, so the state must say when that starts (the watch is set up,
plus, if the mount served requests before that, what it learnt then has expired) and that it
ended when the watch fails."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from inotify_simple import INotify

from zarrfuse.storage import store_watch
from zarrfuse.storage.store_watch import WHOLE_DIRECTORY, WatchState, follow_store

pytestmark = pytest.mark.timeout(60)


class StandingClock:
    """The watch's monotonic clock, which moves only when the test moves it, and counts
    how often it was read: the watch thread reads it once a round."""

    def __init__(self) -> None:
        self.now, self.reads = 1000.0, 0

    def monotonic(self) -> float:
        self.reads += 1
        return self.now


async def _until(condition: Callable[[], object], what: str) -> None:
    """Polls ``condition`` until it holds; fails, not hangs, after 10 s."""
    with trio.move_on_after(10):
        while not condition():
            await trio.sleep(0.02)
        return
    raise AssertionError(what)


@pytest.mark.parametrize("serving", [True, False], ids=["serving", "before-serving"])
def test_the_watch_is_live_only_once_what_was_learnt_before_it_has_expired(
        tmp_path, serving):
    """A mount that serves before its watch is set up waits the settle time; one that waits
    for the watch (a fresh writable mount) learnt nothing unwatched: live at once. The
    settle time runs on a clock the test moves."""
    (tmp_path / "c").mkdir()
    clock = StandingClock()
    state = WatchState(settle=0.6, clock=clock.monotonic)
    if serving:
        state.serving()
    seen: list[set[str]] = []
    told_all: list[bool] = []

    async def apply(keys: set[str]) -> None:
        seen.append(keys)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            start = clock.now
            clock.now += 1  # the watch is set up after ``start``
            nursery.start_soon(follow_store, tmp_path, apply, state)
            with trio.fail_after(10):
                await state.set_up.wait()
            if serving:  # rounds go by, the clock standing: not live before the settle time
                rounds = clock.reads
                await _until(lambda: clock.reads >= rounds + 3, "three rounds")
                assert not state.live
                clock.now += 0.5
                rounds = clock.reads
                await _until(lambda: clock.reads >= rounds + 3, "three rounds")
                assert not state.live
                clock.now += 0.1
            await _until(lambda: state.live, "the watch never went live")
            told_all.append(state.tells_all(start))  # learnt before the watch was set up
            told_all.append(state.tells_all(clock.now))  # learnt since
            await trio.to_thread.run_sync((tmp_path / "c" / "0").write_bytes, b"x")
            await _until(lambda: seen, "no change was delivered")
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert state.set_up.is_set()
    # Only a watch up before serving saw every change; a later one, every change since.
    assert told_all == [not serving, True]
    assert {"c/0"} <= set().union(*seen)
    assert not state.live  # the mount ended: no longer told
    assert not state.tells_all(clock.now)


def test_the_state_tells_its_listeners_once_and_only_if_it_was_live():
    told: list[str] = []

    async def ended() -> None:
        told.append("ended")

    never = WatchState()
    never.when_ended(ended)
    trio.run(never.end)  # the watch failed before it was up: nothing relied on it
    assert told == [] and not never.live
    assert never.set_up.is_set() and not never.tells_all(time.monotonic())  # served at once

    state = WatchState()
    state.when_ended(ended)
    state.started()
    assert state.live
    trio.run(state.end)
    trio.run(state.end)
    state.started()  # a late round of a watch that ended is not believed
    assert told == ["ended"] and not state.live


@pytest.mark.expect_log(r"applying changes to .* failed")
def test_a_change_the_mount_cannot_apply_ends_its_trust_in_the_watch(tmp_path):
    state = WatchState()
    told: list[bool] = []

    async def ended() -> None:
        told.append(True)

    state.when_ended(ended)

    async def apply(keys: set[str]) -> None:
        raise RuntimeError("cannot apply")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_store, tmp_path, apply, state)
            await _until(lambda: state.live, "the watch never went live")
            await trio.to_thread.run_sync(os.mkdir, tmp_path / "new")
            await _until(lambda: told, "the failure was not told")
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert told == [True] and not state.live


Step = tuple[Callable[[], object], Callable[[set[str]], bool]]


def _reported(store: Path, *steps: Step) -> set[str]:
    """The keys a live watch of ``store`` reports in the last of ``steps``: each step's
    ``change()`` runs, then the step lasts until ``until(keys reported in it)`` holds
    (within 10 s)."""
    state = WatchState()
    seen: set[str] = set()

    async def apply(keys: set[str]) -> None:
        seen.update(keys)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_store, store, apply, state)
            await _until(lambda: state.live, "the watch never went live")
            for change, until in steps:
                seen.clear()
                await trio.to_thread.run_sync(change)
                await _until(functools.partial(until, seen), "not all were reported")
            nursery.cancel_scope.cancel()

    trio.run(main)
    return seen


def test_a_directory_made_and_filled_at_once_is_reported_with_its_files(tmp_path):
    """zarr-python makes a directory and stores chunks in it at once: a file may be
    written before the watch watches the directory, so the watch lists a new directory
    once it watches it, and every file is told, found there or by its own event."""

    def store() -> None:
        (tmp_path / "c" / "2").mkdir(parents=True)
        for name in ("0", "1"):
            (tmp_path / "c" / "2" / name).write_bytes(b"x")

    seen = _reported(tmp_path, (store, lambda keys: {"c/2/0", "c/2/1"} <= keys))
    assert not [key for key in seen if key.endswith(WHOLE_DIRECTORY)], seen


@pytest.mark.parametrize("walked_at_most", [store_watch.WALKED_AT_MOST, 1])
def test_a_directory_moved_in_is_reported_with_its_files(tmp_path, monkeypatch,
                                                         walked_at_most):
    """A directory moved into the store brings files no event names: each file found in
    it is told, for the mount to forget that their names were absent. Past the files it
    names one by one, the directory itself is told, marked, for the mount to list again;
    only then (the mount's own commits make directories too)."""
    monkeypatch.setattr(store_watch, "WALKED_AT_MOST", walked_at_most)
    store, staged = tmp_path / "store", tmp_path / "staged" / "2"
    (store / "c").mkdir(parents=True)
    staged.mkdir(parents=True)
    for name in ("0", "1"):
        (staged / name).write_bytes(b"x")

    seen = _reported(store, (lambda: os.rename(staged, store / "c" / "2"),
                             lambda keys: {"c/2", "c/2/0", "c/2/1"} <= keys))
    assert any(key.endswith(WHOLE_DIRECTORY) for key in seen) == (walked_at_most < 2), seen


def test_a_symlink_that_appears_is_never_walked_out_of_the_store(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "c").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"x")
    seen = _reported(store, (lambda: os.symlink(outside, store / "c" / "link"),
                             lambda keys: "c/link" in keys))
    assert not [key for key in seen if key.startswith("c/link/")]


def _inotify_masks() -> list[int]:
    """The event masks of every inotify watch this process holds (/proc/self/fdinfo)."""
    masks = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:  # closed meanwhile
            continue
        masks += [int(line.split(" mask:")[1].split()[0], 16)
                  for line in info.splitlines() if line.startswith("inotify wd:")]
    return masks


def test_the_watch_asks_for_every_directorys_changes_never_for_opens_or_reads(tmp_path):
    """Each read of a chunk file (the mount's own included) would otherwise wake the
    watching thread: 4-6% of a cold pass over 2000 files."""
    for directory in ("c/0", "c/1", "c/1/7"):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
    (tmp_path / "c" / "0" / "0").write_bytes(b"x")
    masks: list[int] = []
    _reported(tmp_path, (lambda: masks.extend(_inotify_masks()), lambda keys: True))
    assert len(masks) == 5  # the root, c, c/0, c/1, c/1/7
    opens_or_reads = 0x01 | 0x10 | 0x20  # IN_ACCESS, IN_CLOSE_NOWRITE, IN_OPEN
    changes = 0x02 | 0x04 | 0x08 | 0x40 | 0x80 | 0x100 | 0x200  # written, made, moved, gone
    assert all(mask & opens_or_reads == 0 and mask & changes == changes for mask in masks), [
        hex(mask) for mask in masks]


def test_a_directory_renamed_inside_the_store_is_followed_under_its_new_name(tmp_path):
    """``mv c/0 c/5``: the old directory went, the new one came with its files, and a
    later change inside it is told by its new key, never the old one."""
    (tmp_path / "c" / "0").mkdir(parents=True)
    for name in ("0", "1"):
        (tmp_path / "c" / "0" / name).write_bytes(b"x")
    seen = _reported(
        tmp_path,
        (lambda: os.rename(tmp_path / "c" / "0", tmp_path / "c" / "5"),
         lambda keys: {"c/0", "c/5", "c/5/0", "c/5/1"} <= keys),
        (lambda: (tmp_path / "c" / "5" / "1").write_bytes(b"y"), lambda keys: "c/5/1" in keys))
    assert not [key for key in seen if key.startswith("c/0")], seen


def test_a_directory_that_became_a_symlink_before_it_was_watched_is_not_walked(tmp_path):
    """A directory made, then replaced by a symlink to one outside before the watch adds
    it: nothing through the symlink is watched."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    store.mkdir()
    os.symlink(outside, store / "c")
    with INotify() as inotify:
        watches = store_watch._Watches(inotify)
        watches.add(str(store))
        watches.add(str(store / "c"))  # as after the directory's IN_CREATE
        assert set(watches.paths.values()) == {str(store)}
