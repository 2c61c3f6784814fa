"""The rendered formats, apart from ``render``, so the command line names them without
loading the image libraries."""

__all__ = ["FORMATS", "SHOWN_FORMATS", "WHOLE_IMAGE_FORMATS"]

FORMATS = {"tiff": ".tiff", "npy": ".npy", "png": ".png"}
"""Per-chunk rendered formats and their default file suffixes (``raw`` shows the stored
bytes)."""

WHOLE_IMAGE_FORMATS = {"ome-tiff": ".ome.tif"}
"""Formats that show every array as one file (the whole image), and that file's suffix."""

SHOWN_FORMATS = ("raw", *FORMATS, *WHOLE_IMAGE_FORMATS)
"""Every value ``--format`` takes."""
