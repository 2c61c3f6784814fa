"""Whether the ``mount`` extra is installed: ``pip install zarrfuse`` leaves pyfuse3 (no
wheels: it compiles against libfuse3) and trio out. The commands that mount or talk to a
mount ask here first and say in one line what to install, rather than fail with an
ImportError from deep inside the mount."""

from __future__ import annotations

import importlib.util

__all__ = ["missing_mount_extra"]


def missing_mount_extra() -> str | None:
    """The one line to show when pyfuse3 or trio is missing (looked up, never imported)."""
    if all(importlib.util.find_spec(name) is not None for name in ("pyfuse3", "trio")):
        return None
    return ('mounting needs the mount extra: pip install "zarrfuse[mount]" '
            "(pyfuse3 compiles against libfuse3: apt install libfuse3-dev pkg-config gcc)")
