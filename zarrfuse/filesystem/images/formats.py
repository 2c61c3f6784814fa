"""The rendered formats a mount can show, apart from the code that renders them.

Kept in a module of its own so that the command line can name the formats without loading
the image libraries that ``render`` needs.
"""

__all__ = ["FORMATS", "SHOWN_FORMATS", "WHOLE_IMAGE_FORMATS"]

FORMATS = {"tiff": ".tiff", "npy": ".npy", "png": ".png"}
"""Per-chunk rendered formats and their default file suffixes (``raw`` shows the stored
bytes)."""

WHOLE_IMAGE_FORMATS = {"ome-tiff": ".ome.tif"}
"""Formats that show every array as one file (the whole image), and that file's suffix."""

SHOWN_FORMATS = ("raw", *FORMATS, *WHOLE_IMAGE_FORMATS)
"""Every value ``--format`` takes."""
