"""OME-Zarr (NGFF) multiscales metadata, read from a group's attributes dict (no I/O).

An OME-Zarr image is shown as one OME-TIFF: its multiscales' datasets are the pyramid
levels, its axes give the leading dims' roles and the physical sizes, ``omero`` the channel
names. v0.4 keeps the metadata at the top of the attributes (``.zattrs``), v0.5 under
``"ome"``; both are read. Only the first multiscale of a group is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zarrfuse.errors import ConfigurationError

__all__ = ["Axis", "Multiscales", "ome_unit", "read_multiscales", "read_well_field"]

# NGFF unit names (UDUNITS-2 names the spec lists) and OME's symbols for them.
_PREFIXES = dict(zip(
    ["", "yotta", "zetta", "exa", "peta", "tera", "giga", "mega", "kilo", "hecto", "deci",
     "centi", "milli", "micro", "nano", "pico", "femto", "atto", "zepto", "yocto"],
    ["", *"YZEPTGMkhdcmµnpfazy"], strict=True))
_UNITS = {
    name + base: symbol + short
    for base, short in (("meter", "m"), ("second", "s"))
    for name, symbol in _PREFIXES.items()
} | {"angstrom": "Å", "foot": "ft", "inch": "in", "mile": "mi", "parsec": "pc", "yard": "yd",
     "day": "d", "hour": "h", "minute": "min"}


def ome_unit(unit: str | None) -> str | None:
    """OME's symbol for an NGFF unit name ("micrometer" -> "µm"); None if it has none."""
    if unit is None:
        return None
    return _UNITS.get(unit, unit if unit in _UNITS.values() else None)


@dataclass(frozen=True)
class Axis:
    name: str
    type: str | None  # "space", "time", "channel", another string, or None (unknown)
    unit: str | None

    @property
    def role(self) -> str | None:
        """The axis' OME role: 't', 'c', 'z' or None (y and x are the plane)."""
        if self.type == "time" or (self.type is None and self.name.lower() == "t"):
            return "t"
        if self.type == "channel" or (self.type is None and self.name.lower() == "c"):
            return "c"
        if self.name.lower() == "z" and self.type in ("space", None):
            return "z"
        return None


@dataclass(frozen=True)
class Multiscales:
    """What the OME-TIFF view needs of a group's first multiscale."""

    version: str | None
    paths: tuple[str, ...]  # dataset paths, level 0 (full resolution) first
    axes: tuple[Axis, ...]  # empty when the metadata names none (before v0.3)
    scale: tuple[float, ...] | None  # level 0's pixel size per axis, global scale applied
    channel_names: tuple[str, ...]  # omero.channels[].label; empty if absent
    channel_colors: tuple[int, ...] = ()
    """omero.channels[].color as OME-XML's Color (RGBA packed in a signed 32-bit int);
    empty unless every channel has one."""
    means_colour: bool = False
    """``omero`` says the channels are one colour picture (see :func:`means_colour`)."""
    method: str | None = None
    """How the lower levels were made (the multiscale's ``type``: ``gaussian``, ...)."""
    omero_channels: tuple[Mapping[str, Any], ...] = ()
    """``omero.channels`` as written (colours, windows, active: the composite's look)."""

    def leading_roles(self) -> list[str | None]:
        """ome_xml's ``roles``: those of the axes before the last two (y, x)."""
        return [a.role for a in self.axes[:-2]]

    def physical_sizes(self) -> dict[str, tuple[float, str]]:
        """ome_xml's ``physical_sizes``: per axis x, y, z, t with a unit OME knows."""
        out: dict[str, tuple[float, str]] = {}
        if self.scale is None or len(self.scale) != len(self.axes):
            return out
        for axis, value in zip(self.axes, self.scale, strict=True):
            key = axis.role if axis.role in ("z", "t") else axis.name.lower()
            unit = ome_unit(axis.unit)
            if key in ("x", "y", "z", "t") and unit is not None:
                out[key] = (value, unit)
        return out


def _scale(transforms: Any) -> list[float] | None:
    for t in transforms or []:
        if isinstance(t, Mapping) and t.get("type") == "scale" and "scale" in t:
            return [float(v) for v in t["scale"]]
    return None


def _axes(raw: Any) -> tuple[Axis, ...]:
    axes = []
    for a in raw or []:
        if isinstance(a, str):  # v0.3: names only
            axes.append(Axis(a, None, None))
        else:
            axes.append(Axis(str(a["name"]), a.get("type"), a.get("unit")))
    return tuple(axes)


def _omero_channels(attributes: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """``omero.channels``; empty unless each is a mapping."""
    channels = (attributes.get("omero") or {}).get("channels") or []
    return tuple(channels) if all(isinstance(c, Mapping) for c in channels) else ()


def _each(channels: Sequence[Mapping[str, Any]], key: str, convert: Callable[[Any], Any]
          ) -> tuple[Any, ...]:
    """Every channel's ``key``, converted; none if a channel lacks it (OME-XML wants one
    per channel)."""
    values = [None if c.get(key) is None else convert(c.get(key)) for c in channels]
    return tuple(values) if None not in values else ()


def ome_color(hex_color: Any) -> int | None:
    """OME-XML's Color of an omero colour (``"RRGGBB"``, or ``"RRGGBBAA"``): RGBA in a signed
    32-bit int, opaque unless it says otherwise; None for anything else."""
    text = str(hex_color).strip().lstrip("#")
    if len(text) not in (6, 8):
        return None
    try:
        value = int(text if len(text) == 8 else text + "ff", 16)
    except ValueError:
        return None
    return value - (1 << 32) if value >= 1 << 31 else value


RGB_HEX = ("ff0000", "00ff00", "0000ff")


def means_colour(attributes: Mapping[str, Any]) -> bool:
    """Whether OME-Zarr's ``omero`` metadata says the channels are the red, green and blue
    (and alpha) of one picture: 3 or 4 channels coloured red, green, blue in that order (a
    4th, alpha, in any colour), or the ``color`` rendering model with no channel coloured.
    Channels coloured otherwise (DAPI blue first, say) are fluorescence, never colour."""
    omero = attributes.get("omero")
    if not isinstance(omero, Mapping):
        return False
    channels = omero.get("channels") or []
    if not isinstance(channels, Sequence) or len(channels) not in (3, 4):
        return False
    colours = [str(c.get("color", "")).strip().lstrip("#").lower()[:6]
               if isinstance(c, Mapping) else "" for c in channels]
    if any(colours):
        return tuple(colours[:3]) == RGB_HEX
    rdefs = omero.get("rdefs")
    return isinstance(rdefs, Mapping) and str(rdefs.get("model", "")).lower() == "color"


def read_multiscales(attributes: Mapping[str, Any]) -> Multiscales | None:
    """The first multiscale of a group's attributes (v0.4 top level, v0.5 under "ome"), or
    None if there is none. Malformed metadata: ConfigurationError."""
    ome = attributes.get("ome")
    source: Mapping[str, Any] = ome if isinstance(ome, Mapping) and "multiscales" in ome else (
        attributes
    )
    multiscales = source.get("multiscales")
    if not multiscales:
        return None
    try:
        first = multiscales[0]
        datasets: Sequence[Mapping[str, Any]] = first["datasets"]
        paths = tuple(str(d["path"]) for d in datasets)
        axes = _axes(first.get("axes"))
        scale = _scale(datasets[0].get("coordinateTransformations"))
        overall = _scale(first.get("coordinateTransformations"))
        if scale is not None and overall is not None:
            scale = [a * b for a, b in zip(scale, overall, strict=True)]
        version = first.get("version", source.get("version"))
        method = first.get("type")
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ConfigurationError(f"malformed OME-Zarr multiscales metadata: {e!r}") from None
    if not paths:
        raise ConfigurationError("OME-Zarr multiscales metadata lists no datasets")
    if scale is not None and not all(math.isfinite(v) for v in scale):
        scale = None
    both = (_omero_channels(source), _omero_channels(attributes))
    names = _each(both[0], "label", str) or _each(both[1], "label", str)
    colors = _each(both[0], "color", ome_color) or _each(both[1], "color", ome_color)
    return Multiscales(
        version=None if version is None else str(version),
        paths=paths,
        axes=axes,
        scale=None if scale is None else tuple(scale),
        channel_names=names,
        channel_colors=colors,
        means_colour=means_colour(source) or means_colour(attributes),
        method=None if method is None else str(method),
        omero_channels=both[0] or both[1],
    )


def read_well_field(attributes: Mapping[str, Any]) -> str | None:
    """The path of an HCS well's first field (``well.images[0]``; v0.5 under "ome"), whose
    preview shows the well; None if the group is no well (or names no field)."""
    ome = attributes.get("ome")
    source = ome if isinstance(ome, Mapping) and "well" in ome else attributes
    try:
        field = str(source["well"]["images"][0]["path"])
    except (KeyError, IndexError, TypeError):
        return None
    return field if field and field not in (".", "..") and "/" not in field else None  # a child
