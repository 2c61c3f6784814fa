"""Tests never wait on the clock (issue 53 point 7): no assert on an elapsed wall-clock time
(figures belong in ``bench/``; a time bound that is the behaviour is a deadline handed to the
code under test, its outcome asserted, with ``tests.deadlines.answered`` as hang guard), and
no sleep to let things settle (wait for an event, poll with a deadline, or move a clock the
test controls: ``MountClock``, ``TtlClock``, trio's ``MockClock``).

Read with ``ast`` from every file under ``tests/``. What it cannot tell apart is the
allow-list below, each entry with its reason."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

WALL_CLOCKS = frozenset({
    "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns",
})
"""``time.<name>()``: the wall clock (trio's ``current_time`` is virtual under MockClock)."""

DEADLINES = frozenset({"move_on_after", "move_on_at", "fail_after", "fail_at"})
"""trio's scopes that bound a poll inside them."""

SLEEPS_ALLOWED = {
    ("http_servers.py", "*"): "test servers that simulate slowness: the slowness is the point",
    ("fuse/test_mount_crash.py",
     "test_kill_9_under_parallel_writers_leaves_every_chunk_old_or_new"):
        "the workload runs a random while before the crash: the pace is the point",
    ("storage/test_object_journal.py",
     "test_kill_9_of_an_s3_mount_under_parallel_writers_leaves_every_chunk_old_or_new"):
        "the workload: writers copy a random while, then the crash",
    ("fuse/test_mount_follows_store.py",
     "test_a_chunk_removed_and_stored_again_under_readers_shows_the_store"):
        "a paced workload: writes behind the mount at the paces the watch must follow",
}
"""(path under tests/, function or "*") -> why its sleeps are no waits on the clock."""


def _clock_call(node: ast.AST) -> bool:
    """``time.monotonic()`` and the other wall clocks (``time.time()``...)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in WALL_CLOCKS and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "time")


def _sleep(node: ast.AST) -> str | None:
    """``"time"`` or ``"trio"`` for a ``time.sleep(...)`` or ``trio.sleep(...)`` call."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sleep" and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("time", "trio")):
        return node.func.value.id
    return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _targets(targets: list[ast.expr]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


class _Clocks:
    """What a module knows about clock readings: names read from a wall clock (a start, a
    deadline), names that hold a difference of readings (an elapsed time), and functions
    that return one."""

    def __init__(self, tree: ast.Module) -> None:
        self.readings: set[str] = set()
        self.elapsed: set[str] = set()
        self.timing: set[str] = set()
        assigned: list[tuple[set[str], ast.expr]] = []
        returned: list[tuple[str, ast.expr]] = []
        functions: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append(node.name)
                returned += [(node.name, n.value) for n in ast.walk(node)
                             if isinstance(n, ast.Return) and n.value is not None]
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                assigned.append((_targets(node.targets if isinstance(node, ast.Assign)
                                          else [node.target]), node.value))
        for _ in range(2):  # a name read from another: twice reaches what the tests do
            for targets, value in assigned:
                if self.is_elapsed(value):
                    self.elapsed |= targets
                elif any(self._reading(n) for n in ast.walk(value)):
                    self.readings |= targets
            self.timing |= {name for name, value in returned if self.is_elapsed(value)}

    def _reading(self, node: ast.AST) -> bool:
        return _clock_call(node) or (isinstance(node, ast.Name) and node.id in self.readings)

    def is_elapsed(self, node: ast.AST) -> bool:
        """Whether ``node`` is (or holds) a difference of clock readings."""
        for n in ast.walk(node):
            if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
                    and self._reading(n.left) and self._reading(n.right)):
                return True  # a reading minus a reading (minus a constant: a time point)
            if isinstance(n, ast.Name) and n.id in self.elapsed:
                return True
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id in self.timing):
                return True
        return False


_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def elapsed_asserts(tree: ast.Module) -> Iterator[int]:
    """Lines of asserts that compare an elapsed wall-clock time."""
    clocks = _Clocks(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for comp in ast.walk(node.test):  # names bound over an elapsed time count as one
            if isinstance(comp, ast.comprehension) and clocks.is_elapsed(comp.iter):
                clocks.elapsed |= _targets([comp.target])
        for compare in ast.walk(node.test):
            if (isinstance(compare, ast.Compare)
                    and any(isinstance(op, _ORDER) for op in compare.ops)
                    and any(clocks.is_elapsed(side)
                            for side in [compare.left, *compare.comparators])):
                yield node.lineno
                break


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _bounded_poll(node: ast.AST, parents: dict[ast.AST, ast.AST], clocks: _Clocks) -> bool:
    """Whether a sleep is the pause of a poll with a deadline: inside a ``while`` that reads
    a wall clock (or a deadline read from one), or inside a trio scope with a deadline."""
    at: ast.AST | None = node
    while at is not None:
        if isinstance(at, ast.While) and any(
                clocks._reading(n) for n in ast.walk(at) if n is not node):
            return True
        if isinstance(at, ast.With | ast.AsyncWith) and any(
                isinstance(item.context_expr, ast.Call)
                and isinstance(item.context_expr.func, ast.Attribute)
                and item.context_expr.func.attr in DEADLINES for item in at.items):
            return True
        at = parents.get(at)
    return False


def _function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    at = parents.get(node)
    while at is not None and not isinstance(at, ast.FunctionDef | ast.AsyncFunctionDef):
        at = parents.get(at)
    return at.name if at is not None else "<module>"


def clock_sleeps(tree: ast.Module, source: str) -> Iterator[tuple[int, str]]:
    """(line, function) of sleeps that wait on the clock: a ``time.sleep`` that is no pause
    of a poll with a deadline, a ``trio.sleep`` of a module that runs no MockClock."""
    clocks, parents = _Clocks(tree), _parents(tree)
    virtual = "MockClock(" in source
    for node in ast.walk(tree):
        kind = _sleep(node)
        if kind is None or (kind == "trio" and virtual):
            continue
        if not _bounded_poll(node, parents, clocks):
            yield node.lineno, _function(node, parents)


@functools.cache
def _modules() -> list[tuple[str, str, ast.Module]]:
    """Every module under tests/ that reads ``time.`` or sleeps: (path under tests/, source,
    tree); read once. (Only ``time.X`` and ``trio.sleep`` are recognised: ``from time import
    monotonic`` would hide a clock, and nothing here imports it so.)"""
    out = []
    for path in sorted(TESTS.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "time." not in source and "sleep(" not in source:
            continue
        out.append((path.relative_to(TESTS).as_posix(), source, ast.parse(source, str(path))))
    return out


def test_no_assert_compares_an_elapsed_wall_clock_time():
    found = [f"tests/{name}:{line}" for name, _, tree in _modules()
             for line in elapsed_asserts(tree)]
    assert not found, (
        "asserts on elapsed wall-clock time (figures belong in bench/; assert the answer "
        f"to a deadline handed to the code, with tests.deadlines.answered as hang guard): {found}")


def test_no_sleep_waits_on_the_clock():
    found = [f"tests/{name}:{line} ({function})" for name, source, tree in _modules()
             for line, function in clock_sleeps(tree, source)
             if (name, function) not in SLEEPS_ALLOWED and (name, "*") not in SLEEPS_ALLOWED]
    assert not found, (
        "sleeps that wait on the clock (wait for an event, poll with a deadline, or move a "
        f"clock the test controls; or allow-list a paced workload with its reason): {found}")


def test_every_allowed_sleep_is_still_there():
    """The allow-list shrinks with the sleeps it excuses."""
    sleeping = {(name, function) for name, source, tree in _modules()
                for _, function in clock_sleeps(tree, source)}
    files = {name for name, _ in sleeping}
    stale = [key for key in SLEEPS_ALLOWED
             if (key not in sleeping) and not (key[1] == "*" and key[0] in files)]
    assert not stale, stale


def test_the_scan_sees_what_it_forbids():
    """The checks find the shapes the suite had (and pass what it keeps)."""
    bad = ast.parse(
        "def t():\n"
        "    started = time.monotonic()\n"
        "    day_ago = time.time() - 86400\n"
        "    assert mtime() > day_ago and mtime() > time.time() - 60\n"
        "    run()\n"
        "    took = time.monotonic() - started\n"
        "    assert 0.9 < took < 5\n"
        "    assert time.monotonic() - started < 30\n"
        "    timed = [_timed(f) for f in fs]\n"
        "    assert all(s < 3.5 for s, _ in timed[1:])\n"
        "    time.sleep(0.5)\n"
        "def _timed(fn):\n"
        "    started = time.monotonic()\n"
        "    fn()\n"
        "    return time.monotonic() - started, None\n")
    assert list(elapsed_asserts(bad)) == [7, 8, 10]  # not 4: times, not durations
    assert list(clock_sleeps(bad, "")) == [(11, "t")]
    good = ast.parse(
        "def t():\n"
        "    deadline = time.monotonic() + 10\n"
        "    while not done():\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.01)\n"
        "async def u():\n"
        "    with trio.move_on_after(10):\n"
        "        while not done():\n"
        "            await trio.sleep(0.02)\n")
    assert list(elapsed_asserts(good)) == []
    assert list(clock_sleeps(good, "")) == []
