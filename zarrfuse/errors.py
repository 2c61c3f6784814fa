"""The zarrfuse error family.

Every error zarrfuse raises on purpose carries the errno a filesystem should answer with, so
the FUSE adapter can map domain errors to ``FUSEError`` in exactly one place. This module is
a leaf: it imports nothing from the package.
"""

from __future__ import annotations

import errno as _errno


class ZarrFuseError(Exception):
    """Base of all deliberate zarrfuse errors; ``errno`` is what a filesystem answers."""

    errno: int = _errno.EIO


class ConfigurationError(ZarrFuseError, ValueError):
    """Metadata or a configuration that zarrfuse refuses (bad encoding, transformer, option)."""

    errno = _errno.EINVAL


class ChunkKeyError(ZarrFuseError, ValueError):
    """A key that is not the canonical key of any chunk under the encoding in use."""

    errno = _errno.ENOENT


class PartsError(ZarrFuseError):
    """A chunk whose concat-parts are inconsistent: some missing, or a sized part of wrong size."""

    errno = _errno.EIO


class WriteRefusedError(ZarrFuseError, ValueError):
    """A value that cannot be stored as the chunk it is written to; nothing was written."""

    errno = _errno.EIO


class SourceError(ZarrFuseError):
    """A source that cannot be opened: missing, not a Zarr v3 node, or malformed metadata."""

    errno = _errno.ENOENT


class MountError(ZarrFuseError):
    """A mountpoint that cannot be used: missing, not a directory, or already mounted."""

    errno = _errno.EINVAL
