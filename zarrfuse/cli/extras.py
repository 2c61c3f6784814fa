"""Whether the ``mount`` extra is installed: ``pip install zarrfuse`` leaves pyfuse3 and trio out.

pyfuse3 has no wheels and compiles against libfuse3, so the base install (the extensions, the
API, ``info``, ``verify``, ``convert-tiff``) does without it. The commands that mount or talk
to a mount ask here first and, without the extra, say in one line what to install instead of
failing with an ImportError from deep inside the mount.
"""

from __future__ import annotations

import importlib.util

__all__ = ["MOUNT_EXTRA_MESSAGE", "MOUNT_MODULES", "missing_mount_extra"]

MOUNT_MODULES = ("pyfuse3", "trio")
"""What ``zarrfuse[mount]`` adds: the modules a mount imports."""

MOUNT_EXTRA_MESSAGE = (
    'mounting needs the mount extra: pip install "zarrfuse[mount]" '
    "(pyfuse3 compiles against libfuse3: apt install libfuse3-dev pkg-config gcc)"
)


def missing_mount_extra() -> str | None:
    """The one line to show when pyfuse3 or trio is not installed; None when both are.

    Looks them up without importing them, so it is cheap and loads nothing.
    """
    if all(importlib.util.find_spec(name) is not None for name in MOUNT_MODULES):
        return None
    return MOUNT_EXTRA_MESSAGE
