"""Which arrays become whole-image files, and each file's geometry (planes, samples, pages,
pyramid levels: docs/views.md, 'Whole images'). An OME-Zarr image's axes never hold
samples: its last two are always y and x.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from zarrfuse.api.ome_zarr import Multiscales
from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.images.colour_axis import ColourAxis, colour_axis
from zarrfuse.filesystem.images.composite import Look, look_of
from zarrfuse.filesystem.images.image_names import sibling_name
from zarrfuse.filesystem.images.whole_image_file import LevelChunks, Preview, WholeImage
from zarrfuse.tiff.ome_xml import image_description
from zarrfuse.tiff.strip_image import StripImagePlan, imagej_description, imagej_pages
from zarrfuse.tiff.whole_image import ImageLevel, WholeImagePlan, image_dtype_check, tile_size_for

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


PREVIEW_SIDE = 768
"""The preview's longest side at most: 768 x 768 RGB, uncompressed, is 1.8 MB, under the
2 MB over which file managers (pcmanfm) make no thumbnail."""
PREVIEW_STEPS = 8
"""A level more than this many times PREVIEW_SIDE gets no preview (it would be read whole)."""


def _picture(shape: Sequence[int], order: tuple[int, ...] | None, axis: bool
             ) -> tuple[int, ...]:
    """The composite's shape ``[..., Y, X, 3]`` of an array of ``shape`` whose channel axis
    (if ``axis``) moves last by ``order``."""
    ordered = [int(shape[d]) for d in order] if order else [int(n) for n in shape]
    return (*(ordered[:-1] if axis else ordered), 3)


def _leading(path: str, shape: Sequence[int], samples: int) -> int:
    """How many dimensions come before the plane (y, x and maybe samples)."""
    leading = len(shape) - (3 if samples > 1 else 2)
    if leading < 0:
        raise ConfigurationError(
            f"{path or '/'}: a {len(shape)}-dimensional array is not an image (needs Y and X)"
        )
    return leading


def _plan(name: str, shapes: Sequence[tuple[int, ...]], chunks: Sequence[Sequence[int]],
          dtype: np.dtype, samples: int, roles: Sequence[str | None], **ome: Any
          ) -> WholeImagePlan:
    """The plan of levels of ``shapes``: tiles the chunks' size (no longer than the image) by
    TIFF's rule; page 0's description OME-XML (for types OME lacks, tifffile's shape)."""
    shape, y = shapes[0], len(shapes[0]) - (3 if samples > 1 else 2)
    levels = [ImageLevel(sh, (tile_size_for(min(ch[y], sh[y])),
                              tile_size_for(min(ch[y + 1], sh[y + 1]))))
              for sh, ch in zip(shapes, chunks, strict=True)]
    return WholeImagePlan(levels, dtype, samples=samples, description=image_description(
        shape=shape, dtype=dtype, name=name, roles=list(roles), sizes=shape[:y], y=shape[y],
        x=shape[y + 1], samples=samples, **ome))


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
        leading = _leading(path, level.shape, samples)
        names = metadata.get("dimension_names") or [None] * len(level.shape)
        roles = roles_of(names[:leading])
        colour = None if samples > 1 else colour_axis(
            roles, level.shape, level.dtype, policy=self._colour)
        return self._image(path, name, [level], roles, time_ns, samples, colour)

    def _image(
        self,
        path: str,
        name: str,
        levels: Sequence[LevelChunks],
        roles: Sequence[str | None],
        time_ns: int,
        samples: int = 1,
        colour: ColourAxis | None = None,
        omero: Sequence[Mapping[str, Any]] = (),
        channels: Mapping[str, Any] | None = None,
        **ome: Any,
    ) -> WholeImage:
        """The image of ``levels``, with its siblings. With ``colour``, that axis is its
        RGB(A) samples: one colour page per plane of the other axes, each tile made from the
        channels' chunks. ``channels``: OME-XML's channel names and colours (grey only)."""
        shape_of = colour.image_shape if colour is not None else tuple
        plan = _plan(name, [shape_of(lv.shape) for lv in levels],
                     [shape_of(lv.chunks) for lv in levels], levels[0].dtype,
                     colour.samples if colour is not None else samples,
                     roles if colour is None else colour.leading(roles),  # type: ignore[arg-type]
                     **ome, **(channels or {}))
        image = WholeImage(path, name, levels, plan, context=self._context,
                           metadata_time_ns=time_ns, order=None if colour is None else colour.order)
        return self._with_siblings(image, roles, colour, omero, **ome)

    def _with_siblings(
        self, image: WholeImage, roles: Sequence[str | None], colour: ColourAxis | None,
        omero: Sequence[Mapping[str, Any]] = (), **ome: Any,
    ) -> WholeImage:
        """``image`` with its siblings: the strip-organised file for ImageJ 1.x, the colour
        composite of two or more grey channels, the preview (``composite``). ``roles``: OME
        roles of the array's dimensions before y and x; ``omero``: its channels' look."""
        level = image.levels[0]
        dtype, samples = level.dtype, image.plan.samples
        channels = [d for d, r in enumerate(roles) if r == "c"]
        axis = channels[0] if len(channels) == 1 and level.shape[channels[0]] > 1 else None
        if samples > 1 and colour is None:
            look = look_of(samples, dtype, rgb=True) if dtype.kind == "u" else None
        elif dtype.kind not in "uif":
            look = None
        elif axis is None:
            look = look_of(1, dtype, axis=False)
        else:
            look = look_of(level.shape[axis], dtype, omero, rgb=colour is not None)
        self._with_strips(image, roles, colour, look if axis is not None else None)
        if look is None:
            return image
        order = None if axis is None else (*(d for d in range(len(level.shape)) if d != axis),
                                           axis)
        shapes = [_picture(lv.shape, order, look.axis) for lv in image.levels]
        siblings = self._preview(image, shapes, order, look)
        if axis is not None:
            plan = _plan(image.name, shapes, [_picture(lv.chunks, order, True)
                                              for lv in image.levels],
                         np.dtype("u1"), 3, [r for d, r in enumerate(roles) if d != axis], **ome)
            siblings.insert(0, WholeImage(
                image.path, sibling_name(image.name, ".composite.tif"), image.levels, plan,
                context=self._context, metadata_time_ns=image.metadata_time_ns, order=order,
                look=look))
        image.siblings += siblings
        return image

    def _preview(self, image: WholeImage, shapes: Sequence[tuple[int, ...]],
                 order: tuple[int, ...] | None, look: Look) -> list[WholeImage]:
        """The preview: the composite of the first page of the largest level that fits in
        PREVIEW_SIDE (else of the smallest, every step-th pixel), as a PNG."""
        index = next((i for i, sh in enumerate(shapes) if max(sh[-3:-1]) <= PREVIEW_SIDE),
                     len(shapes) - 1)
        shape = shapes[index]
        step = -(-max(shape[-3:-1]) // PREVIEW_SIDE)
        if step > PREVIEW_STEPS:
            log.info("%s: no preview: its smallest level is %s", image.path or "/", shape)
            return []
        height, width = (-(-n // 16) * 16 for n in shape[-3:-1])
        plan = WholeImagePlan([ImageLevel(shape, (height, width))], np.dtype("u1"),
                                samples=3, description="")
        return [Preview(image.path, sibling_name(image.name, ".preview.png"),
                        [image.levels[index]], plan, context=self._context,
                        metadata_time_ns=image.metadata_time_ns, order=order, look=look,
                        step=step)]

    def _with_strips(self, image: WholeImage, roles: Sequence[str | None],
                     colour: ColourAxis | None, look: Look | None) -> None:
        """The strip-organised sibling for ImageJ 1.x (``tiff.strip_image``): its full
        resolution, pages in ImageJ's order, channels coloured by ``look``'s LUTs in
        composite mode; none when it would not fit in 4 GiB."""
        level = image.levels[0]
        ndim, samples = len(level.shape), image.plan.samples
        plane = ndim - (3 if samples > 1 and colour is None else 2)
        lead = [d for d in range(plane) if colour is None or d != colour.axis]
        ranked, dims = imagej_pages([roles[d] if d < len(roles) else None for d in lead],
                                    [level.shape[d] for d in lead])
        tail = list(range(plane, ndim)) + ([colour.axis] if colour else [])
        order = tuple([lead[i] for i in ranked] + tail)
        shape = tuple(level.shape[d] for d in order)
        pages = math.prod(shape[: len(lead)])
        luts = None if look is None else look.imagej()
        try:
            plan = StripImagePlan(shape, level.dtype, samples=samples,
                                  description=imagej_description(pages, dims, luts is not None),
                                  ij_metadata=luts)
        except ConfigurationError as e:
            log.info("%s: no strip-organised copy for ImageJ: %s", image.path or "/", e)
            return
        image.siblings.append(WholeImage(
            image.path, sibling_name(image.name, ".imagej.tif"), [level], plan,
            context=self._context, metadata_time_ns=image.metadata_time_ns,
            order=None if order == tuple(range(ndim)) else order))

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
        channels = None  # a colour image's channels are its samples: no names, no colours
        if colour is None or len(roles) != len(first.shape) - 2:
            _leading(path, first.shape, 1)
            colour, channels = None, {"channel_names": multiscales.channel_names,
                                      "channel_colors": multiscales.channel_colors}
        return self._image(path, name, opened, roles, time_ns, 1, colour,
                           multiscales.omero_channels, channels,
                           physical_sizes=multiscales.physical_sizes())
