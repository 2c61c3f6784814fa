"""The mount configuration: what the command line (or fstab, or a unit file) asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MountConfig"]


@dataclass(frozen=True)
class MountConfig:
    """Everything a mount needs to know, parsed once and never changed.

    ``suffix`` and ``max_children`` override the view encoding that zarrfuse derives from each
    array's own chunk key encoding (None: derive). ``fuse_options`` are extra ``-o`` options
    passed to the kernel (``allow_other``, ...).
    """

    source: str
    mountpoint: str
    suffix: str | None = None
    max_children: int | None = None
    read_only: bool = False
    foreground: bool = False
    fuse_options: tuple[str, ...] = ()
    debug: bool = False
    log_file: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict)
