"""The adapter's one wrapper around every pyfuse3 handler, driven in process: errors become
the right errno with one line, requests that only read are cut at ``--store-timeout``, and a
stalled store makes the next ones fail within a second (issue 30, point 3)."""

from __future__ import annotations

import errno
import logging
import time

import pyfuse3
import pytest
import trio

from zarrfuse.errors import CorruptChunk, NotFound
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.fuse.operations import FuseOperations
from zarrfuse.fuse.request_errors import BOUNDED, STALLED_WAIT, fuse_errors


class Ops:
    """What the wrapper needs of the adapter: counters, the timeout, the stall mark."""

    def __init__(self, timeout: float | None = None) -> None:
        self.counters = Counters()
        self.store_timeout = timeout
        self.stalled_until = 0.0

    @fuse_errors
    async def lookup(self, wait: float = 0.0, error: BaseException | None = None) -> str:
        await trio.sleep(wait)
        if error is not None:
            raise error
        return "answer"

    @fuse_errors
    async def flush(self, wait: float = 0.0) -> str:
        await trio.sleep(wait)
        return "stored"


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
    started = time.monotonic()
    assert _errno(ops, wait=5.0) == errno.EIO
    assert time.monotonic() - started < 0.3 + 0.5
    started = time.monotonic()  # the store counts as stalled: a second at most
    assert _errno(ops, wait=5.0) == errno.EIO
    assert time.monotonic() - started < min(0.3, STALLED_WAIT) + 0.5
    assert _errno(ops) is None  # a store that answers is answered


def test_requests_that_store_are_never_cut(caplog):
    ops = Ops(timeout=0.1)
    with caplog.at_level(logging.WARNING):
        assert trio.run(lambda: ops.flush(wait=0.4)) == "stored"
    assert not caplog.records
