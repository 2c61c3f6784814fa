"""Mounts made by someone else: ``/dev/fd/N`` as the mountpoint.

In a Kubernetes pod, or under ``mount.fuse3 -o drop_privileges``, a privileged helper opens
``/dev/fuse``, makes the mount with ``fd=N`` itself, and hands the open descriptor to the
file system, which then needs no ``CAP_SYS_ADMIN`` and no ``fusermount3``. libfuse serves
such a descriptor when the mountpoint it is given is ``/dev/fd/N``; it then neither mounts
nor unmounts, and its loop ends when the helper (or anyone) unmounts, as with any mount.
"""

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
