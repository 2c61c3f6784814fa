"""How the ``zarrfuse`` processes end: without interpreter finalisation.

Object-store clients (obstore's Rust runtime) keep native threads that Python does not know
about. When the interpreter finalises while one of them is still running, the process can
die of SIGABRT, SIGBUS or SIGSEGV after its work is done and its error printed (obstore
0.12.0: about 1 exit in 40 after a refused ``az://`` mount), so a caller sees a crash
instead of the exit status. A command's work is finished when its ``main`` returns (the
daemon's ``serve`` returns after the last commit and the store watch's end): the process
flushes logs and output and leaves with ``os._exit``. Threads still running then (idle pool
workers) end with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["leave", "run_and_leave"]


def leave(status: int) -> NoReturn:
    """End the process with ``status`` once every log handler and standard stream is
    flushed; no finalisation."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(status)


def run_and_leave(main: Callable[[], int | None]) -> NoReturn:
    """Run a command's ``main`` and leave with its status (a SystemExit's too)."""
    try:
        status = main()
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    leave(0 if status is None else status)
