"""Every pyfuse3 handler's wrapper: exceptions become ``FUSEError`` and a log line (any other
escaping exception would end pyfuse3's loop: a dead mount), reads bounded by --store-timeout."""

from __future__ import annotations

import errno
import functools
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import pyfuse3
import trio

from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.request_deadline import finished, past_deadline, serving

__all__ = ["BOUNDED", "STALLED_WAIT", "fuse_errors"]

log = logging.getLogger("zarrfuse.fuse.operations")  # the adapter's own lines

P = ParamSpec("P")
R = TypeVar("R")

_QUIET_ERRNOS = frozenset({errno.ENOENT, errno.ESTALE})


BOUNDED = frozenset({
    "lookup", "getattr", "opendir", "readdir", "open", "read", "statfs", "getxattr",
    "listxattr",
})
"""Requests answered within ``--store-timeout`` (EIO past it): those that only read. Those
that store are not cut here: EIO for a commit that then lands would be a lie
(``storage.signed_put`` bounds them instead)."""

STALLED_WAIT = 1.0
"""Seconds a request that reads may wait while the store counts as stalled (docs/sources.md:
a tool's next calls fail within a second instead of each waiting the whole timeout)."""

REPEAT_QUIET = 5.0
"""Seconds within which the same failure again (the kernel's second try of a lookup or a
read, of any range of the same object) is logged at DEBUG: one WARNING line per fault."""


def fuse_errors(
    handler: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Turn every exception into a FUSEError with the right errno, logging why."""

    name = handler.__name__
    said: dict[str, float] = {}  # the last WARNING's text, when it was said

    def warn(text: str) -> None:
        now, fault = trio.current_time(), re.sub(r" bytes \d+-\d+", "", text)  # any range
        again = now - said.get(fault, -REPEAT_QUIET) < REPEAT_QUIET
        said.clear()
        said[fault] = now
        log.log(logging.DEBUG if again else logging.WARNING, "%s", text)

    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await handler(*args, **kwargs)
        except ExceptionGroup as group:  # tasks run together (a listing's stats): one error
            error: Exception = group
            while isinstance(error, ExceptionGroup):
                error = error.exceptions[0]
            raise error from None

    @functools.wraps(handler)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        counters: Counters = args[0].counters  # type: ignore[attr-defined]
        counters.requests[name] += 1
        started = trio.current_time()
        ops = args[0]
        deadline: float | None = ops.store_timeout  # type: ignore[attr-defined]
        answered = False
        try:
            if deadline is None or name not in BOUNDED:
                return await run(*args, **kwargs)
            stalled = started < ops.stalled_until  # type: ignore[attr-defined]
            token = serving(min(deadline, STALLED_WAIT) if stalled else deadline)
            try:
                result = await run(*args, **kwargs)
                answered = True
                return result
            except BaseException as e:
                if not past_deadline(e):
                    raise
            finally:
                finished(token)
            log.log(logging.DEBUG if stalled else logging.WARNING,
                    "%s: the store did not answer within %g s (--store-timeout); answering "
                    "EIO, and giving the next requests %g s each for as long", name,
                    deadline, STALLED_WAIT)
            raise pyfuse3.FUSEError(errno.EIO)
        except pyfuse3.FUSEError as e:
            if e.errno != errno.ENOSYS:  # "not implemented" tells the kernel; it is no failure
                counters.errors[errno.errorcode.get(e.errno, str(e.errno))] += 1
            raise
        except ZarrFuseError as e:
            if e.errno in _QUIET_ERRNOS:
                level = logging.DEBUG
            else:
                level = logging.INFO if e.expected else logging.WARNING
            if level == logging.WARNING:
                warn(f"{name}: {e}")
            else:
                log.log(level, "%s: %s", name, e)
            counters.errors[errno.errorcode.get(e.errno, str(e.errno))] += 1
            raise pyfuse3.FUSEError(e.errno) from None
        except OSError as e:
            warn(f"{name}: store error: {e}")
            counters.errors[errno.errorcode.get(e.errno or errno.EIO, "EIO")] += 1
            raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
        except Exception:
            log.exception("%s: unexpected error; answering EIO", name)
            counters.errors["EIO"] += 1
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            took = trio.current_time() - started
            counters.request_seconds[name] += took
            if deadline is not None and name in BOUNDED and not answered and (
                took >= 0.9 * deadline  # timed out here, or in the store client
            ):
                ops.stalled_until = started + took + deadline  # type: ignore[attr-defined]

    return wrapper
