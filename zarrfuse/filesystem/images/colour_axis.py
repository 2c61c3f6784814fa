"""Which axis of an image holds one picture's colours, and the axis order that makes it the
TIFF's samples: only where metadata or ``--colour always`` says so, and 3 or 4 channels of
uint8 or uint16 (three stains shown as RGB would be as wrong as a photo shown grey).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarrfuse.filesystem.images.render import COLOUR_DTYPES

__all__ = ["COLOUR_CHOICES", "ColourAxis", "colour_axis"]

COLOUR_CHOICES = ("auto", "always", "never")


@dataclass(frozen=True)
class ColourAxis:
    """The array dimension ``axis`` holds ``samples`` colours; ``order`` lists the array's
    dimensions in the image's order (that one moved last, after y and x)."""

    axis: int
    samples: int
    order: tuple[int, ...]

    def image_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(shape[d]) for d in self.order)

    def leading(self, values: Sequence[object]) -> list[object]:
        """``values`` of the array's leading dimensions without the colour axis."""
        return [v for d, v in enumerate(values) if d != self.axis]


def colour_axis(
    roles: Sequence[str | None],
    shape: Sequence[int],
    dtype: np.dtype,
    *,
    policy: str = "auto",
    means_colour: bool = False,
) -> ColourAxis | None:
    """The colour axis of an image whose leading dimensions (before y, x) have OME
    ``roles`` ('t', 'c', 'z' or None); None where its channels stay grey."""
    if policy == "never" or np.dtype(dtype) not in COLOUR_DTYPES:
        return None
    channels = [d for d, role in enumerate(roles) if role == "c"]
    if len(channels) != 1 or int(shape[channels[0]]) not in (3, 4):
        return None
    if policy != "always" and not means_colour:
        return None
    axis = channels[0]
    order = (*(d for d in range(len(shape)) if d != axis), axis)
    return ColourAxis(axis, int(shape[axis]), order)
