"""A progress bar for long commands (``zarrfuse verify``, conversions), drawn on a terminal only.

Small on purpose (no dependency): one line on stderr, redrawn in place with ``\\r`` at most
ten times a second, erased when done. When the stream is not a terminal (a pipe, a log file,
systemd's journal) nothing is drawn, so logs stay clean; ``write()`` still prints messages.

    with Progress(total=len(items), unit="chunk", description="verifying") as bar:
        for item in items:
            ...
            bar.update()
            if bad:
                bar.write(f"{item}: failed")  # printed above the bar, on stdout

Thread-safe: worker threads may call ``update`` and ``write``. ``total`` may be unknown
(None, a listing in progress) and set later.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import IO, Any

__all__ = ["Progress"]

_MIN_INTERVAL = 0.1


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes = f"{rest // 60:02d}:{rest % 60:02d}"
    return f"{hours}:{minutes}" if hours else minutes


class Progress:
    """A one-line progress bar on ``stream`` (stderr), active only if it is a terminal."""

    def __init__(
        self,
        total: int | None = None,
        *,
        description: str = "",
        unit: str = "it",
        stream: IO[str] | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.total = total
        self.description = description
        self.unit = unit
        self.count = 0
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._shown = False

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def set_total(self, total: int | None) -> None:
        with self._lock:
            self.total = total
            self._draw(force=True)

    def reset(self, total: int | None, description: str | None = None) -> None:
        """Start over (count, clock) for a new phase of the work."""
        with self._lock:
            self.total = total
            self.count = 0
            self._started = time.monotonic()
            if description is not None:
                self.description = description
            self._draw(force=True)

    def set_description(self, description: str) -> None:
        with self._lock:
            self.description = description
            self._draw(force=True)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; redraw if the last drawing is old enough."""
        with self._lock:
            self.count += n
            self._draw(force=self.total is not None and self.count >= self.total)

    def write(self, line: str, file: IO[str] | None = None) -> None:
        """Print ``line`` (to stdout by default) without garbling the bar."""
        with self._lock:
            self._erase()
            print(line, file=sys.stdout if file is None else file, flush=True)
            self._draw(force=True)

    def close(self) -> None:
        """Erase the bar (the caller prints its own summary)."""
        with self._lock:
            self._erase()
            self.enabled = False

    def line(self, width: int | None = None) -> str:
        """The bar's text as it would be drawn now, fitted to ``width`` columns."""
        width = width or shutil.get_terminal_size((80, 24)).columns
        elapsed = time.monotonic() - self._started
        rate = self.count / elapsed if elapsed > 0 else 0.0
        head = f"{self.description}: " if self.description else ""
        if self.total:
            fraction = min(self.count / self.total, 1.0)
            left = (self.total - self.count) / rate if rate > 0 else 0.0
            tail = (
                f" {self.count}/{self.total} {self.unit} "
                f"[{_duration(elapsed)}<{_duration(left)}, {rate:.1f} {self.unit}/s]"
            )
            head += f"{fraction:4.0%} "
            room = width - len(head) - len(tail) - 3
            if room >= 10:
                filled = int(fraction * room)
                return f"{head}|{'#' * filled}{' ' * (room - filled)}|{tail}"
            return (head + tail)[: width - 1]
        text = f"{head}{self.count} {self.unit} [{_duration(elapsed)}, {rate:.1f} {self.unit}/s]"
        return text[: width - 1]

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < _MIN_INTERVAL:
            return
        self._drawn_at = now
        try:
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):
            self.enabled = False

    def _erase(self) -> None:
        if self.enabled and self._shown:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                self.enabled = False
            self._shown = False


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
