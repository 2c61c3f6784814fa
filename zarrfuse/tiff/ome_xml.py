"""The OME-XML (schema 2016-06) that makes a whole-image TIFF an OME-TIFF; how dims get
their roles: docs/views.md, 'Inside a whole image'. uint64, int64 and float16 have no OME
pixel type: those files get tifffile's "shaped" description (:func:`image_description`).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tifffile import OmeXml

from zarrfuse.errors import ConfigurationError

__all__ = ["LENGTH_UNITS", "OME_PIXEL_TYPES", "TIME_UNITS", "image_description", "ome_xml"]

NAMESPACE = "http://www.openmicroscopy.org/Schemas/OME/2016-06"
"""The schema of the documents (the one tifffile's OmeXml writes)."""
OME_PIXEL_TYPES = {
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "int8": "int8", "int16": "int16", "int32": "int32",
    "float32": "float", "float64": "double",
}
LENGTH_UNITS = frozenset({
    "Ym", "Zm", "Em", "Pm", "Tm", "Gm", "Mm", "km", "hm", "dam", "m", "dm", "cm", "mm", "µm",
    "nm", "pm", "fm", "am", "zm", "ym", "Å", "thou", "li", "in", "ft", "yd", "mi", "ua", "ly",
    "pc", "pt", "pixel", "reference frame",
})
"""OME's UnitsLength symbols; a physical size in another unit is left out."""
TIME_UNITS = frozenset({
    "Ys", "Zs", "Es", "Ps", "Ts", "Gs", "Ms", "ks", "hs", "das", "s", "ds", "cs", "ms", "µs",
    "ns", "ps", "fs", "as", "zs", "ys", "min", "h", "d",
})
_ROLES = ("z", "c", "t")  # the order unknown dims get roles in, innermost first


def _roles(roles: Sequence[str | None], sizes: Sequence[int]) -> list[tuple[str, int]]:
    """(role, size) of the leading dims after folding, outermost first; roles all set."""
    dims = [((r or "").lower() or None, int(n)) for r, n in zip(roles, sizes, strict=True)]
    if len(dims) > 3:
        folded = math.prod(n for _, n in dims[:-2])
        inner = [(None if r == "t" else r, n) for r, n in dims[-2:]]
        if inner[0][0] is not None and inner[0][0] == inner[1][0]:
            inner = [(None, n) for _, n in inner]
        dims = [("t", folded), *inner]
    given = [r for r, _ in dims if r is not None]
    if any(r not in _ROLES for r in given) or len(set(given)) < len(given):
        raise ConfigurationError(
            f"leading dim roles {list(roles)}: each is 't', 'c', 'z' or None, none twice"
        )
    free = [r for r in _ROLES if r not in given]
    out: list[tuple[str, int]] = []
    for role, size in reversed(dims):
        out.append((role if role is not None else free.pop(0), size))
    return out[::-1]


def _physical(physical: Mapping[str, tuple[float, str]]) -> dict[str, Any]:
    """OmeXml's PhysicalSize/TimeIncrement attributes of the axes whose unit OME knows (a
    size without its unit would be read as µm)."""
    out: dict[str, Any] = {}
    for axis in ("x", "y", "z", "t"):
        if axis not in physical:
            continue
        size, unit = physical[axis]
        if axis == "t":
            if unit in TIME_UNITS:
                out |= {"TimeIncrement": float(size), "TimeIncrementUnit": unit}
        elif unit in LENGTH_UNITS and size > 0:
            name = f"PhysicalSize{axis.upper()}"
            out |= {name: float(size), f"{name}Unit": unit}
    return out


def ome_xml(
    *,
    name: str,
    roles: Sequence[str | None],
    sizes: Sequence[int],
    y: int,
    x: int,
    samples: int = 1,
    dtype: Any,
    physical_sizes: Mapping[str, tuple[float, str]] | None = None,
    channel_names: Sequence[str] | None = None,
    channel_colors: Sequence[int] | None = None,
) -> str:
    """The OME-XML of one image whose pages are the leading dims (``roles``, ``sizes``) in C
    order. ``physical_sizes``: per axis a (value, OME unit symbol) pair; channel names and
    colours are used when there is one per channel. The UUID is derived from what the
    document describes, so every mount shows the same bytes for the same image."""
    dtype_name = np.dtype(dtype).name
    if dtype_name not in OME_PIXEL_TYPES:
        raise ConfigurationError(
            f"data type {dtype_name} has no OME pixel type (uint8/16/32, int8/16/32, float, "
            "double); use image_description for a plain TIFF description"
        )
    dims = _roles(roles, sizes)
    planes = math.prod(n for _, n in dims)
    axes = "".join(r.upper() for r, _ in dims) + "YX" + ("S" if samples > 1 else "")
    shape = (*(n for _, n in dims), y, x, *((samples,) if samples > 1 else ()))
    metadata: dict[str, Any] = {"Name": name, **_physical(physical_sizes or {})}
    channels = dict(dims).get("c", 1)
    channel: dict[str, list[Any]] = {}
    if channel_names and len(channel_names) == channels:
        channel["Name"] = list(channel_names)
    if channel_colors and len(channel_colors) == channels:
        channel["Color"] = [int(c) for c in channel_colors]
    if channel:
        metadata["Channel"] = channel
    identity = json.dumps([name, axes, shape, dtype_name, sorted(metadata.items(), key=str)],
                          default=str)
    document = OmeXml(UUID=str(uuid.uuid5(_UUID_NAMESPACE, identity)), Creator="zarrfuse")
    document.addimage(np.dtype(dtype), shape, (planes, 1, 1, y, x, samples), axes=axes,
                      **metadata)
    return document.tostring(declaration=True)


_UUID_NAMESPACE = uuid.UUID("5f0c6a52-8b7e-4c55-9a55-7a1e0d0f2e11")
"""Namespace of the documents' UUIDs (uuid5 of what a document describes)."""


def image_description(
    *, shape: Sequence[int], dtype: Any, **ome: Any
) -> str:
    """Page 0's ImageDescription: :func:`ome_xml` (``ome`` are its arguments), or for the
    types OME lacks, tifffile's shaped description ``{"shape": [...]}`` of the level-0
    ``shape``."""
    if np.dtype(dtype).name in OME_PIXEL_TYPES:
        return ome_xml(dtype=dtype, **ome)
    return json.dumps({"shape": [int(n) for n in shape]})


