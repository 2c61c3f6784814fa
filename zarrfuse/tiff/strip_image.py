"""``NAME.imagej.tif``: the strip-organised sibling of a whole image, for ImageJ 1.x, which
reads no tiled TIFF. Why its layout: docs/views.md, 'Inside a whole image'. Pure code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tifffile import imagej_metadata_tag

from zarrfuse.errors import ConfigurationError
from zarrfuse.tiff.ifd import BYTE, LONG, Flavour
from zarrfuse.tiff.whole_image import ImageLevel, WholeImagePlan

__all__ = ["StripImagePlan", "imagej_description", "imagej_pages"]

_TILE_TAGS = frozenset({322, 323, 324, 325})
_IMAGEJ_RANK = {"t": 0, "z": 1, "c": 2}  # slowest first: ImageJ's planes are CZT


class StripImagePlan(WholeImagePlan):
    """One level, stored as strips of one row, in classic TIFF (ImageJ 1.x reads no
    BigTIFF): ConfigurationError when the file would not fit in 4 GiB."""

    def __init__(
        self, shape: tuple[int, ...], dtype: np.dtype, *, samples: int, description: str,
        ij_metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """``ij_metadata``: tifffile's IJMetadata keys (``LUTs``, ``Ranges``) for page 0."""
        width = shape[-2] if samples > 1 else shape[-1]
        self._ij_tags = [(tag, BYTE if typ == 1 else LONG,
                          value if typ == 1 else np.frombuffer(value, "<u4"))
                         for tag, typ, _, value, _ in imagej_metadata_tag(dict(ij_metadata), "<")
                         ] if ij_metadata else []
        super().__init__([ImageLevel(shape, (1, width))], dtype, samples=samples,
                         description=description, bigtiff=False)

    def _check_tile(self, level: int, length: int, width: int, image_width: int) -> None:
        if length != 1 or width != image_width:
            raise ConfigurationError(f"a strip is one row of {image_width}: got {length}x{width}")

    def _entries(
        self, level: int, page: int, offsets: np.ndarray, flavour: Flavour, subifds: list[int]
    ) -> list[tuple[int, int, Any]]:
        entries = [e for e in super()._entries(level, page, offsets, flavour, subifds)
                   if e[0] not in _TILE_TAGS]
        entries += [
            (273, flavour.offset_type, offsets),  # StripOffsets
            (278, LONG, [1]),  # RowsPerStrip
            (279, LONG, self._counts[level]),  # StripByteCounts
            *(self._ij_tags if page == 0 else []),
        ]
        return sorted(entries, key=lambda e: e[0])


def imagej_pages(
    roles: Sequence[str | None], sizes: Sequence[int]
) -> tuple[list[int], dict[str, int] | None]:
    """The leading dimensions (indices into ``roles``) in ImageJ's page order, and their
    sizes by role; None when the roles are not t, c, z each at most once (a plain stack
    in the array's order then)."""
    known = [r for r in roles if r is not None]
    if len(known) != len(roles) or len(set(known)) != len(known) or not set(known) <= set(
            _IMAGEJ_RANK):
        return list(range(len(roles))), None
    order = sorted(range(len(roles)), key=lambda d: _IMAGEJ_RANK[str(roles[d])])
    return order, {str(roles[d]): int(sizes[d]) for d in order}


def imagej_description(pages: int, dims: dict[str, int] | None, composite: bool = False
                       ) -> str:
    """ImageJ's own ImageDescription: a hyperstack of channels, slices and frames when the
    roles are known, else a stack of ``pages`` slices; ``composite``: channels coloured."""
    lines = ["ImageJ=1.11a", f"images={pages}"]
    if dims is None:
        if pages > 1:
            lines.append(f"slices={pages}")
    else:
        counts = {"channels": dims.get("c", 1), "slices": dims.get("z", 1),
                  "frames": dims.get("t", 1)}
        lines += [f"{key}={n}" for key, n in counts.items() if n > 1]
        if counts["channels"] > 1 or sum(n > 1 for n in counts.values()) > 1:
            lines += ["hyperstack=true", f"mode={'composite' if composite else 'grayscale'}"]
    return "\n".join(lines) + "\n"
