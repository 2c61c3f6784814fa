"""The colour composite of a multichannel image, as Fiji shows it in composite mode (the
formula and defaults: docs/views.md, 'Whole images'). Pure code.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["IMAGEJ_COLOURS", "Look", "Looks", "look_of"]

IMAGEJ_COLOURS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (0, 255, 255),
                  (255, 0, 255), (255, 255, 0), (255, 255, 255))
"""ImageJ's channel colours by index (``CompositeImage.colors``): red, green, blue, grey,
cyan, magenta, yellow, grey; every channel of an image of more than 8 is grey."""
MEASURED_BYTES = 256 << 20
"""The most of the smallest level read to measure default windows; over it, the data type's
range (floats: 0 to 1)."""


def _colour(text: object) -> tuple[int, int, int] | None:
    hex6 = str(text).strip().lstrip("#")[:6]
    try:
        return (int(hex6[0:2], 16), int(hex6[2:4], 16), int(hex6[4:6], 16)) \
            if len(hex6) == 6 else None
    except ValueError:
        return None


def _window(channel: Mapping[str, object]) -> tuple[float, float] | None:
    window = channel.get("window")
    if not isinstance(window, Mapping):
        return None
    try:
        return float(window["start"]), float(window["end"])
    except (KeyError, TypeError, ValueError):
        return None


Tables = list[list[np.ndarray]]
Looks = tuple[np.ndarray, Tables | None]
"""A look's windows and their tables, as one colouring reads them (``Look.snapshot``)."""


class Look:
    """How each channel shows: its colour (RGB, black when off) and display window. Tiles
    are coloured on worker threads while the trio thread may measure or drop the windows:
    each colouring reads the windows and their tables once, as one pair (``_state``)."""

    def __init__(self, colours: Sequence[tuple[int, int, int]], dtype: np.dtype,
                 windows: Sequence[tuple[float, float]] | None, *, axis: bool) -> None:
        """``axis``: the image has a channel axis (blocks end in it); else one grey channel."""
        self.colours = np.array(colours, dtype=np.uint32).reshape(-1, 3)
        self.dtype = np.dtype(dtype)
        self.given = windows is not None
        self.axis = axis
        self._state: tuple[np.ndarray | None, Tables | None] = (
            None if windows is None else np.array(windows, dtype=np.float64), None)
        self._lock = threading.Lock()

    @property
    def windows(self) -> np.ndarray | None:
        """Each channel's display window (None until measured); a new array at each change,
        so a tile coloured through one says which by identity."""
        return self._state[0]

    def _set(self, windows: np.ndarray | None) -> None:
        with self._lock:
            self._state = (windows, None)

    def snapshot(self) -> Looks:
        """The windows (measured) and, for integers of up to 16 bits, one table per channel
        and colour component (built once per windows): what a colouring reads."""
        state = self._state
        windows, tables = state
        assert windows is not None
        if tables is None and self.dtype.kind in "ui" and self.dtype.itemsize <= 2:
            low = np.iinfo(self.dtype).min
            tables = [[(g * k // 255).astype(np.uint8) for k in colour] for g, colour in zip(
                (self.levels(np.arange(low, low + (1 << 8 * self.dtype.itemsize)), c, windows)
                 for c in range(len(self.colours))), self.colours, strict=True)]
            with self._lock:  # kept unless the windows changed meanwhile
                if self._state is state:
                    self._state = (windows, tables)
        return windows, tables

    def levels(self, values: np.ndarray, channel: int, windows: np.ndarray) -> np.ndarray:
        """The 8-bit grey of ``values`` of a channel through its window (ImageJ's mapping:
        integers as ImageJ maps 16 bits, floats as it maps 32)."""
        start, end = (float(v) for v in windows[channel])
        span = max(end - start, 0.0)
        scaled = (values.astype(np.float64) - start) * (
            256 / (span + 1) if self.dtype.kind in "ui" else 255 / max(span, 1e-300))
        return np.clip(np.nan_to_num(np.floor(scaled + 0.5)), 0, 255).astype(np.uint32)

    def _tinted(self, values: np.ndarray, channel: int, out: np.ndarray,
                looks: Looks) -> None:
        """Into ``out``: each colour component of a channel's ``values`` (8 bits, ``levels``
        times the colour's component over 255), through ``looks``' tables where it has
        them."""
        windows, tables = looks
        if tables is not None:  # one conversion to indices, then one take each
            index = values.astype(np.intp)
            if self.dtype.kind == "i":
                index -= np.iinfo(self.dtype).min
            for j in np.flatnonzero(self.colours[channel]):  # "wrap": every index is in
                np.take(tables[channel][j], index, out=out[j], mode="wrap")
        else:
            grey = self.levels(values, channel, windows)
            for j in np.flatnonzero(self.colours[channel]):
                out[j] = grey * self.colours[channel][j] // 255

    def __call__(self, block: np.ndarray,
                 looks: Looks | None = None) -> np.ndarray:
        """The 8-bit RGB of a block ``[..., Y, X, C]`` (``[..., Y, X]`` without a channel
        axis): per channel ``levels`` times its colour over 255, summed, capped at 255.
        Summed plane by plane in 8 bits (``a + min(b, 255 - a)``), interleaved once: a
        third of the memory traffic of summing RGB pixels in 16 bits."""
        if not self.axis:
            block = block[..., None]
        looks = looks or self.snapshot()
        planes = np.zeros((3, *block.shape[:-1]), dtype=np.uint8)
        part, room = np.empty_like(planes), np.empty_like(planes[0])
        for c in range(block.shape[-1]):
            if self.colours[c].any():
                self._tinted(block[..., c], c, part, looks)
                for j in np.flatnonzero(self.colours[c]):
                    np.subtract(255, planes[j], out=room)
                    planes[j] += np.minimum(part[j], room, out=room)
        return np.stack(list(planes), axis=-1)

    def measure(self, values: np.ndarray | None) -> None:
        """Default windows: each channel's minimum and maximum in ``values`` (``[..., C]``,
        the smallest level), or, given None, the data type's range."""
        if values is None or values.size == 0:
            info = np.iinfo(self.dtype) if self.dtype.kind in "ui" else None
            window = (0.0, 1.0) if info is None else (float(info.min), float(info.max))
            self._set(np.array([window] * len(self.colours)))
        else:
            flat = values.reshape(-1, values.shape[-1] if self.axis else 1)
            self._set(np.nan_to_num(np.stack(
                [np.nanmin(flat, axis=0), np.nanmax(flat, axis=0)], axis=1).astype(np.float64)))

    def drop(self) -> None:
        """The data changed: measured windows are measured again."""
        if not self.given:
            self._set(None)

    def imagej(self) -> dict[str, object]:
        """ImageJ's LUTs (a ramp from black to each colour, as ``LUT.createLutFromColor``)
        and, when the file gives them, display ranges: tifffile's IJMetadata keys."""
        ramp = np.arange(256, dtype=np.uint32)
        luts = [(k[:, None] * ramp[None, :] // 255).astype(np.uint8) for k in self.colours]
        ranges = {} if not self.given or self.windows is None else {
            "Ranges": [float(v) for v in self.windows.ravel()]}
        return {"LUTs": luts, **ranges}


def look_of(channels: int, dtype: np.dtype, omero: Sequence[Mapping[str, object]] = (),
            *, axis: bool = True, rgb: bool = False) -> Look:
    """The look of an image of ``channels`` channels from its ``omero`` channels, or Fiji's
    defaults. ``rgb``: red, green, blue (alpha) over the dtype's range unless given."""
    omero = omero if len(omero) == channels else ()
    defaults = (*IMAGEJ_COLOURS[:3], (0, 0, 0)) if rgb else IMAGEJ_COLOURS if (
        channels <= len(IMAGEJ_COLOURS)) else ((255, 255, 255),)
    colours = []
    for c in range(channels):
        given = _colour(omero[c].get("color")) if omero else None
        colour = given or defaults[min(c, len(defaults) - 1)]
        colours.append((0, 0, 0) if omero and omero[c].get("active") is False else colour)
    if channels == 1 and not omero:
        colours = [(255, 255, 255)]
    known = [w for w in map(_window, omero) if w is not None]
    if rgb and len(known) < channels:
        info = np.iinfo(dtype)
        known = [(info.min, info.max)] * channels
    return Look(colours, dtype, known if len(known) == channels else None, axis=axis)
