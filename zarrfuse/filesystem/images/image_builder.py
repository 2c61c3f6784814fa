"""Which arrays become whole-image files, and how each file's geometry is chosen.

An array of two or more dimensions is an image: its last two (``[..., Y, X]``) are the
plane, or its last three (``[..., Y, X, S]``) when the last holds 3 or 4 unsigned samples
whole in every chunk (RGB/RGBA, as dual-access arrays store them). The other dimensions
become pages. An OME-Zarr image group (``multiscales``) is one file: its first dataset is
the full resolution, the others, while they keep the same leading shape, its SubIFD levels.
Its axes never hold samples: OME-Zarr's last two axes are always y and x.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.images.colour_axis import ColourAxis, colour_axis
from zarrfuse.filesystem.images.image_names import strips_file_name
from zarrfuse.filesystem.images.whole_image_file import LevelChunks, WholeImage
from zarrfuse.tiff.ome_xml import image_description
from zarrfuse.tiff.ome_zarr import Multiscales
from zarrfuse.tiff.strip_image import StripImagePlan, imagej_description, imagej_pages
from zarrfuse.tiff.tiles import image_dtype_check, tile_size_for
from zarrfuse.tiff.whole_image import ImageLevel, WholeImagePlan

__all__ = ["ImageBuilder", "LevelOpener", "roles_of", "samples_of"]

log = logging.getLogger(__name__)

LevelOpener = Callable[[str, dict[str, Any]], LevelChunks]
"""Opens the array at a path (its v3-shaped document given): its geometry and the source of
its decoded chunks."""

ROLE_NAMES = {
    "t": "t", "time": "t",
    "c": "c", "channel": "c", "channels": "c", "band": "c", "bands": "c",
    "z": "z", "depth": "z", "plane": "z",
}
"""Dimension names (``dimension_names``, xarray's dims) that say which OME axis a leading
dimension is."""


def roles_of(names: Sequence[str | None]) -> list[str | None]:
    """The OME roles ('t', 'c', 'z' or None) that dimension ``names`` give."""
    return [ROLE_NAMES.get(str(n).lower()) if n else None for n in names]


def samples_of(shape: Sequence[int], chunks: Sequence[int], dtype: np.dtype) -> int:
    """3 or 4 for an RGB/RGBA array (last dimension 3 or 4, unsigned, whole in each chunk,
    at least three dimensions); else 1."""
    if len(shape) >= 3 and shape[-1] in (3, 4) and chunks[-1] == shape[-1] and dtype.kind == "u":
        return int(shape[-1])
    return 1


@dataclass(frozen=True)
class _Plane:
    """Where the image plane sits in an array's dimensions."""

    leading: int
    samples: int


def _plane(path: str, shape: Sequence[int], samples: int) -> _Plane:
    leading = len(shape) - (3 if samples > 1 else 2)
    if leading < 0:
        raise ConfigurationError(
            f"{path or '/'}: a {len(shape)}-dimensional array is not an image (needs Y and X)"
        )
    return _Plane(leading, samples)


def _tile(shape: Sequence[int], chunks: Sequence[int], plane: _Plane) -> tuple[int, int]:
    """Tile length and width: the chunk's (no longer than the image), by TIFF's rule."""
    y = plane.leading
    return (
        tile_size_for(min(chunks[y], shape[y])),
        tile_size_for(min(chunks[y + 1], shape[y + 1])),
    )


def _description(
    name: str,
    shape: tuple[int, ...],
    plane: _Plane,
    dtype: np.dtype,
    roles: Sequence[str | None],
    **ome: Any,
) -> str:
    """Page 0's ImageDescription: OME-XML (or, for types OME lacks, tifffile's shape)."""
    return image_description(
        shape=shape, dtype=dtype, name=name, roles=list(roles),
        sizes=shape[: plane.leading], y=shape[plane.leading], x=shape[plane.leading + 1],
        samples=plane.samples, **ome,
    )


class ImageBuilder:
    """Builds the whole image of an array or of an OME-Zarr image group."""

    def __init__(
        self, open_level: LevelOpener, context: MountContext, *, colour: str = "auto"
    ) -> None:
        """``colour``: ``--colour`` (see ``colour_axis``)."""
        self._open_level = open_level
        self._context = context
        self._colour = colour

    def from_array(
        self, path: str, name: str, metadata: dict[str, Any], time_ns: int
    ) -> WholeImage:
        level = self._open_level(path, metadata)
        image_dtype_check(level.dtype)
        samples = samples_of(level.shape, level.chunks, level.dtype)
        plane = _plane(path, level.shape, samples)
        names = metadata.get("dimension_names") or [None] * len(level.shape)
        roles = roles_of(names[: plane.leading])
        colour = None if samples > 1 else colour_axis(
            roles, level.shape, level.dtype, policy=self._colour)
        if colour is not None:
            return self._coloured(path, name, [level], colour, roles, time_ns)
        layout = WholeImagePlan(
            [ImageLevel(level.shape, _tile(level.shape, level.chunks, plane))],
            level.dtype,
            samples=samples,
            description=_description(name, level.shape, plane, level.dtype, roles),
        )
        return self._with_strips(WholeImage(
            path, name, [level], layout, context=self._context, metadata_time_ns=time_ns
        ), roles, None)

    def _coloured(
        self,
        path: str,
        name: str,
        levels: Sequence[LevelChunks],
        colour: ColourAxis,
        roles: Sequence[str | None],
        time_ns: int,
        **ome: Any,
    ) -> WholeImage:
        """The image with ``colour``'s axis as its RGB(A) samples: one colour page per
        plane of the other axes, each tile made from the channels' chunks."""
        first = levels[0]
        shape = colour.image_shape(first.shape)
        plane = _Plane(len(shape) - 3, colour.samples)
        layout = WholeImagePlan(
            [ImageLevel(colour.image_shape(lv.shape),
                        _tile(colour.image_shape(lv.shape),
                              colour.image_shape(lv.chunks), plane)) for lv in levels],
            first.dtype,
            samples=colour.samples,
            description=_description(name, shape, plane, first.dtype,
                                     colour.leading(roles), **ome),  # type: ignore[arg-type]
        )
        return self._with_strips(WholeImage(path, name, levels, layout, context=self._context,
                                            metadata_time_ns=time_ns, order=colour.order),
                                 roles, colour)

    def _with_strips(
        self, image: WholeImage, roles: Sequence[str | None], colour: ColourAxis | None
    ) -> WholeImage:
        """``image`` with its strip-organised sibling for ImageJ 1.x (``tiff.strip_image``):
        its full resolution, pages in ImageJ's order; none when it would not fit in 4 GiB.
        ``roles``: OME roles of the array's dimensions before y and x."""
        level = image.levels[0]
        ndim, samples = len(level.shape), image.layout.samples
        plane = ndim - (3 if samples > 1 and colour is None else 2)
        lead = [d for d in range(plane) if colour is None or d != colour.axis]
        ranked, dims = imagej_pages([roles[d] if d < len(roles) else None for d in lead],
                                    [level.shape[d] for d in lead])
        tail = list(range(plane, ndim)) + ([colour.axis] if colour else [])
        order = tuple([lead[i] for i in ranked] + tail)
        shape = tuple(level.shape[d] for d in order)
        pages = math.prod(shape[: len(lead)])
        try:
            plan = StripImagePlan(shape, level.dtype, samples=samples,
                                  description=imagej_description(pages, dims))
        except ConfigurationError as e:
            log.info("%s: no strip-organised copy for ImageJ: %s", image.path or "/", e)
            return image
        image.sibling = WholeImage(
            image.path, strips_file_name(image.name), [level], plan, context=self._context,
            metadata_time_ns=image.metadata_time_ns,
            order=None if order == tuple(range(ndim)) else order)
        return image

    def from_multiscales(
        self,
        path: str,
        name: str,
        multiscales: Multiscales,
        levels: Sequence[dict[str, Any] | None],
        time_ns: int,
    ) -> WholeImage:
        """``levels``: the v3-shaped documents of the datasets, in the order of
        ``multiscales.paths`` (None where a dataset cannot be read)."""
        opened: list[LevelChunks] = []
        for dataset, metadata in zip(multiscales.paths, levels, strict=True):
            level_path = "/".join(p for p in (path, dataset) if p)
            if metadata is None:
                if not opened:
                    raise ConfigurationError(f"{level_path}: the full resolution is missing")
                log.warning("%s: level %s is not readable; lower levels left out",
                            path or "/", dataset)
                break
            level = self._open_level(level_path, metadata)
            if opened:
                first, previous = opened[0], opened[-1]
                if (level.shape[:-2] != first.shape[:-2] or level.dtype != first.dtype
                        or level.shape[-2] > previous.shape[-2]
                        or level.shape[-1] > previous.shape[-1]):
                    log.info(
                        "%s: level %s (shape %s, %s) does not reduce only Y and X of %s; "
                        "it and lower levels are left out of the TIFF pyramid",
                        path or "/", dataset, level.shape, level.dtype, first.shape,
                    )
                    break
            opened.append(level)
        first = opened[0]
        image_dtype_check(first.dtype)
        roles = multiscales.leading_roles()
        colour = colour_axis(roles, first.shape, first.dtype, policy=self._colour,
                             means_colour=multiscales.means_colour)
        if colour is not None and len(roles) == len(first.shape) - 2:
            return self._coloured(path, name, opened, colour, roles, time_ns,
                                  physical_sizes=multiscales.physical_sizes())
        plane = _plane(path, first.shape, 1)
        layout = WholeImagePlan(
            [ImageLevel(lv.shape, _tile(lv.shape, lv.chunks, plane)) for lv in opened],
            first.dtype,
            samples=1,
            description=_description(
                name, first.shape, plane, first.dtype, multiscales.leading_roles(),
                physical_sizes=multiscales.physical_sizes(),
                channel_names=multiscales.channel_names,
                channel_colors=multiscales.channel_colors,
            ),
        )
        return self._with_strips(WholeImage(
            path, name, opened, layout, context=self._context, metadata_time_ns=time_ns
        ), roles, None)
