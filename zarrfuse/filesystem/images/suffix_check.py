"""Whether a ``--suffix`` promises a file format an array's files are not (zstd chunks named
``.tiff``): mounting warns, not refuses. Raw files are images only for dual-access arrays or
a last codec that writes image files (named in the codec's name). Pure code, no chunk read.
"""

from __future__ import annotations

import re
from typing import Any

from zarrfuse.tiff.metadata import shard_format_for

__all__ = ["names_a_format", "suffix_mismatch"]

IMAGE_SUFFIXES = {
    ".tif": "tiff", ".tiff": "tiff", ".png": "png", ".npy": "npy",
    ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".bmp": "bmp", ".webp": "webp",
    ".jp2": "jpeg2000", ".j2k": "jpeg2000",
}
"""File suffixes that name an image (or array file) format, and that format."""

CODEC_WORDS = {
    "tif": "tiff", "tiff": "tiff", "png": "png", "jpeg": "jpeg", "jpg": "jpeg", "gif": "gif",
    "bmp": "bmp", "webp": "webp", "jpeg2k": "jpeg2000", "jpeg2000": "jpeg2000", "j2k": "jpeg2000",
}
"""Words of a codec's name that say its output is a file of that format."""


def _stored_format(metadata: dict[str, Any]) -> str | None:
    """The file format of the stored chunks, if the last codec (the one whose output is
    stored) names one: ``imagecodecs_png`` stores PNG files, ``zstd`` or a shard nothing."""
    codecs = metadata.get("codecs") or []
    last = codecs[-1] if codecs else None
    name = str(last.get("name", "")) if isinstance(last, dict) else str(last or "")
    formats = {CODEC_WORDS[w] for w in re.split(r"[^a-z0-9]+", name.lower()) if w in CODEC_WORDS}
    return formats.pop() if len(formats) == 1 else None


def names_a_format(suffix: str | None) -> bool:
    """Whether ``suffix`` names a file format at all (else no array needs looking at)."""
    return (suffix or "").lower() in IMAGE_SUFFIXES


def suffix_mismatch(suffix: str | None, fmt: str, metadata: dict[str, Any]) -> str | None:
    """Why files named with ``suffix`` would not be what the suffix says, or None if they are
    (or the suffix names no known format). ``fmt`` is the mount's ``--format``."""
    named = IMAGE_SUFFIXES.get((suffix or "").lower())
    if named is None:
        return None
    if fmt != "raw":
        return None if named == fmt else f"its files are {fmt.upper()} images, not {named}"
    if named == "tiff" and shard_format_for(metadata) is not None:
        return None  # dual-access: every shard is a TIFF file
    if _stored_format(metadata) == named:
        return None  # an image codec: every chunk is an image file
    codecs = ", ".join(str(c.get("name", c)) if isinstance(c, dict) else str(c)
                       for c in metadata.get("codecs", []))
    return (
        f"its chunk files are the stored Zarr chunks (codecs: {codecs or 'none'}), not {named} "
        f"files; --format {named} shows them as images" if named in ("tiff", "png", "npy")
        else f"its chunk files are the stored Zarr chunks (codecs: {codecs or 'none'}), "
        f"not {named} files"
    )
