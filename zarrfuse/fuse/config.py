"""The mount configuration: what the command line (or fstab, or a unit file) asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.images.formats import WHOLE_IMAGE_FORMATS

__all__ = ["READ_ONLY_SCHEMES", "MountConfig"]

READ_ONLY_SCHEMES = ("http://", "https://")
"""Sources that can only be read: HTTP servers take no writes."""


@dataclass(frozen=True)
class MountConfig:
    """Everything a mount needs to know, parsed once and never changed. ``suffix`` and
    ``max_children``: None derives them from each array's own chunk key encoding."""

    source: str
    mountpoint: str
    suffix: str | None = None
    max_children: int | None = None
    read_only: bool = False
    nonempty: bool = False
    """Mount over a folder with entries in it without the warning (they are hidden)."""
    foreground: bool = False
    fuse_options: tuple[str, ...] = ()
    debug: bool = False
    log_file: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict)
    verify: bool = True
    """Check every chunk against the array's codecs before storing it; refuse what zarr could
    not decode. False (``--no-verify``) stores any bytes."""
    max_chunk_bytes: int | None = None
    """Largest chunk file a write may make (EFBIG beyond); None: derived from the chunk."""
    scratch_mb: int = 512
    """Memory for temporary files (rsync's, editors'); 0 refuses them."""
    uid: int | None = None
    """Owner shown for every file and directory; None: the mounting user."""
    gid: int | None = None
    """Group shown for every file and directory; None: the mounting user's group."""
    umask: int = 0o022
    """Permission bits removed from 0o777 (directories) and 0o666 (files)."""
    format: str = "raw"
    """raw: chunk files are the stored bytes; tiff, npy, png: each chunk rendered as an image;
    ome-tiff: each array as one whole-image OME-TIFF file (read-only)."""
    update_pyramid: bool = True
    """After a write to an OME-Zarr image's full resolution, downsample the region again
    into the levels below (nearest or mean as its metadata names, ome-zarr-py's resize where
    it names none); False: they go stale."""
    watch: bool = True
    """Follow changes other programs make to a local store (inotify), within about a
    second, whatever the view; False: only after ``metadata_ttl``."""
    colour: str = "auto"
    """Whole images: auto shows a channel axis as the colours of one picture where the
    OME-Zarr metadata says so; always wherever it has 3 or 4 uint8/uint16 channels; never
    keeps every channel grey (see ``images.colour_axis``)."""
    layout: Literal["fanout", "source"] = "fanout"
    """fanout: chunk files in the suffix + fanout tree; source: at the arrays' own keys."""
    cache_mb: int = 256
    """Memory for recently rendered chunks (rendered views)."""
    metadata_ttl: float | None = None
    """Seconds a listing (which chunks exist, their sizes) is trusted before it is asked
    again, here and in the kernel's caches; None: for the mount's life when read-only, 1 s
    when writable."""
    symlink_root: str | None = None
    """Local stores: symlinks may lead anywhere beneath this ancestor of the store; None:
    nothing outside the store itself is ever read, written or removed."""
    cache_dir: str | None = None
    """Directory where chunk bytes fetched from a remote store are kept across mounts (shared
    by concurrent mounts); None: no disk cache."""
    cache_size: int = 10 << 30
    """Bytes the disk cache may hold (least recently used out first)."""
    store_timeout: float = 30.0
    """Seconds a request that reads (lookup, getattr, readdir, open, read) may wait for the
    store before it is answered EIO."""
    allow_redirects: bool = False
    """Web sources: follow a redirect to another host; False: refused (EIO, one line)."""

    def __post_init__(self) -> None:
        if self.layout == "source":
            conflicting = [
                flag for flag, given in (
                    ("--suffix", self.suffix is not None),
                    ("--max-children", self.max_children is not None),
                    (f"--format {self.format}", self.format != "raw"),
                ) if given
            ]
            if conflicting:
                raise ConfigurationError(
                    f"--layout source shows the store's own keys; {', '.join(conflicting)} "
                    "shape the fanout layout and cannot be combined with it"
                )
        if self.format in WHOLE_IMAGE_FORMATS:
            conflicting = [
                flag for flag, given in (
                    ("--suffix", self.suffix is not None),
                    ("--max-children", self.max_children is not None),
                ) if given
            ]
            if conflicting:
                raise ConfigurationError(
                    f"--format {self.format} shows every array as one file; "
                    f"{', '.join(conflicting)} shape chunk files and cannot be combined with it"
                )
        if self.source.startswith(READ_ONLY_SCHEMES) and not self.read_only:
            object.__setattr__(self, "read_only", True)
        if self.format in WHOLE_IMAGE_FORMATS and not self.read_only:
            object.__setattr__(self, "read_only", True)  # whole images are read-only views
