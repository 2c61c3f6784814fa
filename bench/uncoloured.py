#!/usr/bin/env python3
"""zarrfuse with the colour composite's colouring left out: every composite pixel is black,
everything else (decoding each channel, tiling, the reads) as zarrfuse does it. What the
``composite`` scenario's MB/s would be if colouring cost nothing: its bound (issue 54).
Nothing here is product code.

    python bench/uncoloured.py mount SOURCE MOUNTPOINT --format ome-tiff --foreground
"""

from __future__ import annotations

import numpy as np

import zarrfuse.cli
from zarrfuse.filesystem.images.composite import Look


def black(self: Look, block: np.ndarray, looks: object = None) -> np.ndarray:
    """The composite's shape and type, with no channel looked at."""
    return np.zeros((*(block.shape[:-1] if self.axis else block.shape), 3), dtype=np.uint8)


if __name__ == "__main__":
    Look.__call__ = black  # type: ignore[method-assign]
    zarrfuse.cli.run()
