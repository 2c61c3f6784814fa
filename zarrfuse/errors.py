"""The zarrfuse error family.

Every error zarrfuse raises on purpose carries the errno a filesystem should answer with, so
the FUSE adapter can map domain errors to ``FUSEError`` in exactly one place. This module is
a leaf: it imports nothing from the package.
"""

from __future__ import annotations

import errno as _errno


class ZarrFuseError(Exception):
    """Base of all deliberate zarrfuse errors; ``errno`` is what a filesystem answers (EIO
    unless a subclass says otherwise)."""

    errno: int = _errno.EIO
    expected: bool = False
    """A refusal tools anticipate and work around (renaming the original to a backup name,
    vim's write probe, emacs's lock symlink): logged as information, not as a warning."""


class ConfigurationError(ZarrFuseError, ValueError):
    """Metadata or a configuration that zarrfuse refuses (bad encoding, transformer, option)."""

    errno = _errno.EINVAL


class ChunkKeyError(ZarrFuseError, ValueError):
    """A key that is not the canonical key of any chunk under the encoding in use."""

    errno = _errno.ENOENT


class PartsError(ZarrFuseError):
    """A chunk whose concat-parts are inconsistent: some missing, or a sized part of wrong size."""


class WriteRefusedError(ZarrFuseError, ValueError):
    """A value that cannot be stored as the chunk it is written to; nothing was written."""


class SourceError(ZarrFuseError):
    """A source that cannot be opened: missing, not a Zarr v3 node, or malformed metadata."""

    errno = _errno.ENOENT


class UnfitDocument(SourceError):
    """A metadata document that cannot be one: a FIFO, socket or device, or over the size
    bound (``limits.MAX_DOCUMENT_BYTES``). Its node is left out (the mount, if it is the
    root), never read."""

    expected = True


class MountError(ZarrFuseError):
    """A mountpoint that cannot be used: missing, not a directory, or already mounted."""

    errno = _errno.EINVAL


class NotFound(ZarrFuseError):
    """No such entry."""

    errno = _errno.ENOENT


class NotShownNow(NotFound):
    """Absent for this caller only, and only for a moment: the kernel must not remember it."""


class NotPermitted(ZarrFuseError):
    """An operation the mount never allows (a name outside the grid, links, renaming chunks)."""

    errno = _errno.EPERM


class NotAChunk(NotPermitted):
    """A name that looks like a chunk of its directory but is not one of the grid."""


class ExpectedRefusal(NotPermitted):
    """EPERM for a step of a save that the saving tool falls back from (see ``expected``)."""

    expected = True


class NameTooLong(ZarrFuseError):
    """A name longer than the mount's NAME_MAX (255 bytes)."""

    errno = _errno.ENAMETOOLONG


class ReadOnlyError(ZarrFuseError):
    errno = _errno.EROFS


class NotADirectory(ZarrFuseError):
    errno = _errno.ENOTDIR


class Exists(ZarrFuseError):
    errno = _errno.EEXIST


class BadHandle(ZarrFuseError):
    errno = _errno.EBADF


class InvalidArgument(ZarrFuseError):
    errno = _errno.EINVAL


class FileTooBig(ZarrFuseError):
    """A chunk file over the size limit."""

    errno = _errno.EFBIG


class CorruptChunk(ZarrFuseError):
    """A stored chunk that does not decode with its array's codecs (EIO, one log line)."""


class NoSpace(ZarrFuseError):
    """The scratch area is full."""

    errno = _errno.ENOSPC


class Stale(ZarrFuseError):
    """An inode the kernel holds no longer stands for its name: an open sent to a fresh
    inode of the name (see ``page_cache``), or a file that is gone since the kernel looked
    it up. The kernel then looks the name up again and repeats the call (path-based calls
    only), so no process sees this; ENOENT instead would be final, even for
    ``open(O_CREAT)`` through the name's cached entry."""

    errno = _errno.ESTALE
    expected = True
