"""The adapter's one wrapper around every pyfuse3 handler, driven in process: errors become
the right errno with one line, requests that only read are cut at ``--store-timeout`` where
they wait (``request_deadline.waited``), and a stalled store makes the next ones fail within
a second (issue 30, point 3)."""

from __future__ import annotations

import errno
import logging

import pyfuse3
import pytest
import trio
import trio.testing

from zarrfuse.errors import CorruptChunk, NotFound
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.fuse.operations import FuseOperations
from zarrfuse.fuse.request_errors import BOUNDED, STALLED_WAIT, fuse_errors
from zarrfuse.request_deadline import waited


class Ops:
    """What the wrapper needs of the adapter: counters, the timeout, the stall mark."""

    def __init__(self, timeout: float | None = None) -> None:
        self.counters = Counters()
        self.store_timeout = timeout
        self.stalled_until = 0.0

    @fuse_errors
    async def lookup(self, wait: float = 0.0, error: BaseException | None = None) -> str:
        await waited(trio.sleep(wait))  # as the handlers wait on the store
        if error is not None:
            raise error
        return "answer"

    @fuse_errors
    async def read(self, waits: int = 2, wait: float = 0.0) -> str:
        """Waits in ``waits`` tasks run together, as a listing of many directories does."""
        async with trio.open_nursery() as nursery:
            for _ in range(waits):
                nursery.start_soon(waited, trio.sleep(wait))
        return "bytes"

    @fuse_errors
    async def getattr(self, background: list[float]) -> str:
        """Starts a wait in a system task (as read-ahead does), which outlives the request."""

        async def ahead() -> None:
            started = trio.current_time()
            await waited(trio.sleep(0.5))
            background.append(trio.current_time() - started)

        trio.lowlevel.spawn_system_task(ahead)
        return "attributes"

    @fuse_errors
    async def flush(self, wait: float = 0.0) -> str:
        await waited(trio.sleep(wait))
        return "stored"


def _clock() -> trio.testing.MockClock:
    """Virtual time that jumps to the next deadline: the waits and cuts are exact, and no
    wall clock is read."""
    return trio.testing.MockClock(autojump_threshold=0)


def _errno(ops: Ops, **kwargs) -> int | None:
    try:
        trio.run(lambda: ops.lookup(**kwargs))
    except pyfuse3.FUSEError as e:
        return e.errno
    return None


def test_every_bounded_name_is_a_handler_the_adapter_has():
    assert all(callable(getattr(FuseOperations, name, None)) for name in BOUNDED)


@pytest.mark.expect_log(r"store error: .*boom", r"unexpected error", r"does not decode")
def test_errors_become_their_errno_and_count():
    ops = Ops()
    assert _errno(ops, error=NotFound("gone")) == errno.ENOENT
    assert _errno(ops, error=CorruptChunk("chunk (0,) does not decode")) == errno.EIO
    assert _errno(ops, error=OSError(errno.EACCES, "boom")) == errno.EACCES
    assert _errno(ops, error=KeyError("a bug")) == errno.EIO  # the mount keeps serving
    assert ops.counters.errors == {"ENOENT": 1, "EIO": 2, "EACCES": 1}
    assert ops.counters.requests["lookup"] == 4


@pytest.mark.expect_log(r"did not answer within")
def test_a_read_request_is_cut_at_the_timeout_and_the_next_ones_fail_fast():
    ops = Ops(timeout=0.3)

    async def cut(wait: float) -> tuple[int | None, float]:
        """The errno of a lookup that waits ``wait``, and how long it took (virtual)."""
        started = trio.current_time()
        try:
            await ops.lookup(wait=wait)
        except pyfuse3.FUSEError as e:
            return e.errno, trio.current_time() - started
        return None, trio.current_time() - started

    async def main() -> None:
        assert await cut(5.0) == (errno.EIO, pytest.approx(0.3))
        # The store counts as stalled: a second at most.
        assert await cut(5.0) == (errno.EIO, pytest.approx(min(0.3, STALLED_WAIT)))
        assert (await cut(0.0))[0] is None  # a store that answers is answered

    trio.run(main, clock=_clock())


@pytest.mark.expect_log(r"did not answer within")
def test_the_kernels_second_try_of_a_read_waits_a_second_not_the_whole_timeout(caplog):
    """Issue 52 point 6: the kernel sends a read whose page failed again at once, so a read
    that waited the whole timeout and its second try made one ``read()`` wait two timeouts
    (10 s at ``--store-timeout 5``). The second try finds the store stalled and waits a
    second: one ``read()`` waits at most the timeout and a second, and says so once. On
    trio's MockClock: no wall clock is read."""
    ops = Ops(timeout=5.0)

    async def main() -> float:
        started = trio.current_time()
        for _ in range(2):  # the read, then the kernel's second try of its page
            with pytest.raises(pyfuse3.FUSEError) as caught:
                await ops.read(waits=1, wait=60.0)
            assert caught.value.errno == errno.EIO
        return trio.current_time() - started

    with caplog.at_level(logging.WARNING):
        took = trio.run(main, clock=_clock())
    assert took <= 5.0 + STALLED_WAIT
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def test_requests_that_store_are_never_cut(caplog):
    ops = Ops(timeout=0.1)
    with caplog.at_level(logging.WARNING):
        assert trio.run(lambda: ops.flush(wait=0.4), clock=_clock()) == "stored"
    assert not caplog.records


@pytest.mark.expect_log(r"did not answer within")
def test_waits_in_tasks_a_request_runs_together_are_cut_as_one_answer():
    ops = Ops(timeout=0.3)

    async def main() -> None:
        assert await ops.read(waits=3) == "bytes"
        started = trio.current_time()
        with pytest.raises(pyfuse3.FUSEError) as caught:
            await ops.read(waits=3, wait=5.0)
        assert caught.value.errno == errno.EIO  # one EIO, not a group of three errors
        assert trio.current_time() - started == pytest.approx(0.3)

    trio.run(main, clock=_clock())
    assert ops.counters.errors == {"EIO": 1}


def test_a_wait_left_running_after_the_answer_is_not_bounded_by_the_request():
    ops = Ops(timeout=0.1)
    background: list[float] = []

    async def main() -> None:
        assert await ops.getattr(background) == "attributes"
        await trio.sleep(0.8)  # past the request's deadline: read-ahead goes on

    trio.run(main, clock=_clock())
    assert len(background) == 1 and background[0] >= 0.5


@pytest.mark.expect_log(r"did not answer within")
def test_a_worker_task_serving_a_request_after_a_cut_one_waits_unbounded():
    """pyfuse3 serves request after request in one task: a deadline ends with its request."""
    ops = Ops(timeout=0.2)

    async def main() -> str:
        with pytest.raises(pyfuse3.FUSEError):
            await ops.lookup(wait=5.0)
        return await ops.flush(wait=0.4)  # not bounded, and not cut by the lookup's deadline

    assert trio.run(main, clock=_clock()) == "stored"
