"""Progress bars for long commands (``zarrfuse verify``, conversions), drawn by tqdm on
stderr when it is a terminal and erased when done; elsewhere (a pipe, a log file, systemd's
journal) nothing is drawn, so logs stay clean, and ``bar.write()`` still prints results (on
stdout, above the bar). Bars may be updated from worker threads."""

from __future__ import annotations

import shutil
import sys
from typing import IO

from tqdm import tqdm

__all__ = ["progress_bar", "restart"]


def progress_bar(
    total: int | None = None,
    *,
    description: str = "",
    unit: str = "it",
    stream: IO[str] | None = None,
    enabled: bool | None = None,
) -> tqdm:
    """A bar counting ``unit``s up to ``total`` (None: unknown yet, set by ``reset``)."""
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        try:
            enabled = stream.isatty()
        except (AttributeError, ValueError):  # closed or not a real stream
            enabled = False
    # The size is asked here: a terminal that reports 0 x 0 (a fresh pty) would make tqdm
    # draw nothing at all.
    columns, lines = shutil.get_terminal_size()
    return tqdm(
        total=total, desc=description, unit=unit, file=stream, disable=not enabled,
        leave=False, ncols=columns or 80, nrows=lines or 24, mininterval=0.1,
        bar_format=_format(total, unit),
    )


def restart(bar: tqdm, total: int | None, description: str) -> None:
    """Start ``bar`` over (count, clock) for a new phase of the work."""
    if bar.disable:  # a disabled tqdm keeps no state to restart
        return
    bar.bar_format = _format(total, bar.unit)
    bar.reset(total=total)
    bar.set_description_str(description)


def _format(total: int | None, unit: str) -> str:
    if total is None:  # a count so far, no bar
        return "{desc}: {n_fmt} " + unit + " [{elapsed}]"
    bar = "{desc}: {percentage:3.0f}% |{bar}| {n_fmt}/{total_fmt} "
    return bar + unit + " [{elapsed}<{remaining}]"

