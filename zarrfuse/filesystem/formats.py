"""The rendered formats a mount can show, apart from the code that renders them.

Kept in a module of its own so that the command line can name the formats without loading
the image libraries that ``render`` needs.
"""

__all__ = ["FORMATS"]

FORMATS = {"tiff": ".tiff", "npy": ".npy", "png": ".png"}
"""Rendered formats and their default file suffixes (``raw`` shows the stored bytes)."""
