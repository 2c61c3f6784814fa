"""Whether a ``--suffix`` promises a file format that the files of an array are not.

A file manager or viewer trusts the extension: ``--suffix .tiff`` on zstd-compressed chunks
of a raw view gives files that every image tool fails on, with nothing pointing at the cause.
So mounting warns (it does not refuse: the suffix may be wanted for other reasons). Which
files are what: a raw view shows the stored bytes, which are TIFF files only for dual-access
arrays; a rendered view shows its format. Pure code on the array's document.
"""

from __future__ import annotations

from typing import Any

from zarrfuse.tiff.metadata import layout_for

__all__ = ["suffix_mismatch"]

IMAGE_SUFFIXES = {
    ".tif": "tiff", ".tiff": "tiff", ".png": "png", ".npy": "npy",
    ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".bmp": "bmp", ".webp": "webp",
    ".jp2": "jpeg2000", ".j2k": "jpeg2000",
}
"""File suffixes that name an image (or array file) format, and that format."""


def suffix_mismatch(suffix: str | None, fmt: str, metadata: dict[str, Any]) -> str | None:
    """Why files named with ``suffix`` would not be what the suffix says, or None if they are
    (or the suffix names no known format). ``fmt`` is the mount's ``--format``."""
    named = IMAGE_SUFFIXES.get((suffix or "").lower())
    if named is None:
        return None
    if fmt != "raw":
        return None if named == fmt else f"its files are {fmt.upper()} images, not {named}"
    if named == "tiff" and layout_for(metadata) is not None:
        return None  # dual-access: every shard is a TIFF file
    codecs = ", ".join(str(c.get("name", c)) if isinstance(c, dict) else str(c)
                       for c in metadata.get("codecs", []))
    return (
        f"its chunk files are the stored Zarr chunks (codecs: {codecs or 'none'}), not {named} "
        f"files; --format {named} shows them as images" if named in ("tiff", "png", "npy")
        else f"its chunk files are the stored Zarr chunks (codecs: {codecs or 'none'}), "
        f"not {named} files"
    )
