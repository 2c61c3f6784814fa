"""Mounts made by someone else: ``/dev/fd/N`` as the mountpoint, a ``/dev/fuse`` descriptor a
privileged helper mounted and handed on (docs/configuration.md); libfuse then neither mounts
nor unmounts."""

from __future__ import annotations

import os
import re
import stat

from zarrfuse.errors import MountError

__all__ = ["FUSE_DEVICE_NUMBER", "handed_fuse_fd"]

FUSE_DEVICE_NUMBER = os.makedev(10, 229)
"""``/dev/fuse``: character device 10, 229 on every Linux."""


def handed_fuse_fd(mountpoint: str) -> int | None:
    """The descriptor a ``/dev/fd/N`` mountpoint names (checked to be an open ``/dev/fuse``),
    or None for an ordinary mountpoint. Raises MountError saying what is wrong."""
    match = re.fullmatch(r"/dev/fd/([0-9]+)", mountpoint)
    if match is None:
        return None
    fd = int(match.group(1))
    try:
        st = os.fstat(fd)
    except OSError:
        raise MountError(
            f"{mountpoint}: descriptor {fd} is not open in this process (the program that "
            f"mounted /dev/fuse with fd={fd} must leave it open for zarrfuse)"
        ) from None
    if not stat.S_ISCHR(st.st_mode) or st.st_rdev != FUSE_DEVICE_NUMBER:
        raise MountError(f"{mountpoint}: descriptor {fd} is not /dev/fuse")
    return fd
