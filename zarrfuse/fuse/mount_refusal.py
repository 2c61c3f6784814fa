"""Why the kernel or fusermount3 refused a mount, in words that say what to fix: they print
the reason on standard error, which a background daemon shows no one, so it is kept here."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Words", "explain", "libfuse_words"]

MAX_WORDS = 4096
"""Bytes of libfuse's output kept (its messages are single lines)."""

CONTAINER_FIX = (
    "mounting needs CAP_SYS_ADMIN, which this process lacks (a container: run it with "
    "--cap-add SYS_ADMIN --device /dev/fuse, or mount outside and hand the descriptor in "
    "as /dev/fd/N, docs/mounting.md)"
)
FIXES = (
    ("user_allow_other",
     "add the line user_allow_other to /etc/fuse.conf (as root), or mount without "
     "-o allow_other"),
    ("mount failed: Operation not permitted", CONTAINER_FIX),
    ("failed to exec fusermount3", "install fuse3 (it provides fusermount3)"),
    ("unknown option", "an -o option neither libfuse nor zarrfuse knows"),
)
"""A phrase of libfuse's or fusermount3's message -> what fixes it."""


class Words:
    """What libfuse printed while mounting (set when the block ends)."""

    text = ""


@contextmanager
def libfuse_words() -> Iterator[Words]:
    """Keep what is written to descriptor 2 during the block, and pass it on afterwards."""
    words = Words()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 2)
        try:
            yield words
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            raw = kept.read()
            if raw:
                os.write(2, raw)
            words.text = raw[:MAX_WORDS].decode("utf-8", "replace").strip()


def explain(text: str, *, privileged: bool) -> str:
    """libfuse's own last lines, then the fix (``privileged``: this process may mount(2)
    itself, so an EPERM means a missing capability, as in a container)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = "; ".join(lines[-3:])
    for phrase, fix in FIXES:
        if phrase in text:
            return f"{said}: {fix}"
    if privileged and "Operation not permitted" in text:
        return f"{said}: {CONTAINER_FIX}"
    return said
