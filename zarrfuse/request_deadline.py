"""The ``--store-timeout`` bound of the FUSE request a trio task serves, applied only where
the request waits.

A trio cancel scope around every request (about 10 us) was a third of the daemon's time per
warm chunk file, whose three requests mostly wait on nothing. So the adapter only records a
request's deadline (``serving``), and every place that may wait (a worker thread reading the
store, another task's read, a lock) waits through ``waited``, which enters a scope then.
The deadline is a context variable: tasks a request starts in a nursery inherit it, system
tasks do not (trio gives them the run's context), nor do later requests of the same pyfuse3
worker task (``finished`` resets it). A leaf: it imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import ContextVar, Token
from typing import TypeVar

import trio

__all__ = ["PastDeadline", "finished", "past_deadline", "serving", "waited"]

T = TypeVar("T")

_DEADLINE: ContextVar[float | None] = ContextVar("zarrfuse_request_deadline", default=None)
"""The trio clock time by which the request this task serves must be answered."""


class PastDeadline(BaseException):
    """A wait of a bounded request outlived its deadline. A BaseException, as trio's own
    ``Cancelled`` is: cleanup code that catches ``Exception`` lets it pass to the adapter,
    which answers EIO."""


def serving(seconds: float) -> Token[float | None]:
    """This task now serves a request to be answered within ``seconds``; hand the token to
    ``finished`` when it is answered."""
    return _DEADLINE.set(trio.current_time() + seconds)


def finished(token: Token[float | None]) -> None:
    """The request ``serving`` began is answered: this task's next waits are unbounded."""
    _DEADLINE.reset(token)


async def waited(wait: Awaitable[T]) -> T:
    """Await ``wait``, cut at the deadline of the request this task serves, if any.

    Raises PastDeadline when cut. A worker thread awaited here must be abandonable
    (``abandon_on_cancel=True``), or the cut comes only when it returns."""
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
