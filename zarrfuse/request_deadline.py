"""The ``--store-timeout`` bound of the FUSE request a trio task serves, entered only where
the request waits (docs/performance.md, "No cancel scope per request"). A context variable:
a request's nursery tasks inherit it, system tasks and later requests do not. A leaf module."""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import ContextVar, Token
from typing import TypeVar

import trio

__all__ = ["PastDeadline", "finished", "past_deadline", "serving", "unbounded", "waited"]

T = TypeVar("T")

_DEADLINE: ContextVar[float | None] = ContextVar("zarrfuse_request_deadline", default=None)
"""The trio clock time by which the request this task serves must be answered."""


class PastDeadline(BaseException):
    """A wait of a bounded request outlived its deadline; a BaseException, as ``Cancelled``,
    so cleanup that catches ``Exception`` lets it reach the adapter (EIO)."""


def serving(seconds: float) -> Token[float | None]:
    """This task now serves a request to be answered within ``seconds``; hand the token to
    ``finished`` when it is answered."""
    return _DEADLINE.set(trio.current_time() + seconds)


def finished(token: Token[float | None]) -> None:
    """The request ``serving`` began is answered: this task's next waits are unbounded."""
    _DEADLINE.reset(token)


def unbounded() -> None:
    """This task serves no request: a loop that outlives the request that started it."""
    _DEADLINE.set(None)


async def waited(wait: Awaitable[T]) -> T:
    """Await ``wait``, cut at this task's request deadline if any (PastDeadline); a worker
    thread awaited here must be ``abandon_on_cancel=True``, or the cut waits for it."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return await wait
    with trio.move_on_at(deadline):
        return await wait
    raise PastDeadline


def past_deadline(error: BaseException) -> bool:
    """Whether ``error`` is a cut wait, alone or among the errors of tasks a request ran
    together (a nursery's group)."""
    return isinstance(error, PastDeadline) or (
        isinstance(error, BaseExceptionGroup) and error.subgroup(PastDeadline) is not None)
