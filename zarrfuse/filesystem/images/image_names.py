"""File names of whole images and their siblings: ``NAME.ome.tif`` (``.zarr`` then ``.ome``
left out of NAME, unless it would be empty), ``.imagej.tif``, ``.composite.tif``,
``.preview.png``; a file name stands for one of three node names.
"""

from __future__ import annotations

from zarrfuse.filesystem.images.formats import WHOLE_IMAGE_FORMATS

__all__ = ["IMAGE_SUFFIX", "SIBLING_SUFFIXES", "image_file_name", "image_node_names",
           "sibling_name"]

IMAGE_SUFFIX = WHOLE_IMAGE_FORMATS["ome-tiff"]
SIBLING_SUFFIXES = (".imagej.tif", ".composite.tif", ".preview.png")
"""The strip-organised sibling for ImageJ 1.x (``tiff.strip_image``), the colour composite
and the small preview (``composite``)."""


def _stem(node_name: str) -> str:
    stem = node_name
    for ending in (".zarr", ".ome"):
        if stem.lower().endswith(ending) and len(stem) > len(ending):
            stem = stem[: -len(ending)]
    return stem


def image_file_name(node_name: str) -> str:
    """The file that shows the node ``node_name`` (its last path component)."""
    return _stem(node_name.rstrip("/").rpartition("/")[2] or "image") + IMAGE_SUFFIX


def sibling_name(image_name: str, suffix: str) -> str:
    """The sibling (``suffix``, one of SIBLING_SUFFIXES) of the image file ``image_name``."""
    return image_name[: -len(IMAGE_SUFFIX)] + suffix


def image_node_names(file_name: str) -> list[str]:
    """The node names ``file_name`` (an image file or a sibling) may show, most likely
    first (none if it is not an image file name)."""
    suffix = next((s for s in (IMAGE_SUFFIX, *SIBLING_SUFFIXES)
                   if file_name.endswith(s) and file_name != s), None)
    if suffix is None:
        return []
    stem = file_name[: -len(suffix)]
    return [stem, f"{stem}.zarr", f"{stem}.ome.zarr", f"{stem}.ome"]
