"""Writing a metadata document the mount shows: accepted only when the bytes end up as
shown, so restoring a backup works (``cp``, ``rsync``'s rename, ``tar x``'s unlink then
create); anything else is EPERM at close, fsync or rename. An unlink is the first step of a
replace: only the unlinking process sees the document absent, for :data:`REPLACE_SECONDS`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from zarrfuse.errors import NotPermitted
from zarrfuse.filesystem.tree.nodes import MetadataFile

__all__ = ["REPLACE_SECONDS", "Replacements", "check_fits", "check_identical"]

log = logging.getLogger(__name__)

REPLACE_SECONDS = 10.0
"""How long a document unlinked by a process stays absent for that process."""


def check_identical(document: MetadataFile, data: bytes) -> None:
    """Accept ``data`` written as ``document`` only if it is the document shown (EPERM)."""
    if data != document.data:
        raise NotPermitted(
            f"{document.name!r}: metadata cannot be changed through the mount; only the "
            f"document shown ({len(document.data)} bytes) may be written back, not a different "
            f"one ({len(data)} bytes); nothing was changed"
        )


def check_fits(document: MetadataFile, end: int) -> None:
    """Refuse a write reaching past the document's size at once: it can never be the same
    bytes, and the daemon never buffers more than a document (EPERM)."""
    if end > len(document.data):
        raise NotPermitted(
            f"{document.name!r}: metadata cannot be changed through the mount; a write up to "
            f"byte {end} is longer than the document shown ({len(document.data)} bytes)"
        )


class Replacements:
    """Documents unlinked as the first step of a replace: by which process, until when."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: dict[MetadataFile, tuple[int, float]] = {}

    def start(self, document: MetadataFile, pid: int) -> None:
        self._pending[document] = (pid, self._clock() + REPLACE_SECONDS)
        log.info("%s unlinked by process %d: kept, and hidden from that process only, until "
                 "it writes the document back (%g s at most)", document.name, pid,
                 REPLACE_SECONDS)

    def hides(self, document: MetadataFile, pid: int | None) -> bool:
        """Whether ``document`` is absent for process ``pid``."""
        pending = self._pending.get(document)
        if pending is None:
            return False
        if self._clock() > pending[1]:
            del self._pending[document]
            log.warning("%s unlinked by process %d was not written back: it stays, as it "
                        "always did; the mount's metadata cannot be removed",
                        document.name, pending[0])
            return False
        return pending[0] == pid

    def end(self, document: MetadataFile) -> None:
        self._pending.pop(document, None)
