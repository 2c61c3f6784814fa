"""zarrfuse: Zarr v2 and v3 arrays as ordinary files, and the zarr-python extensions behind them.

Installing zarrfuse registers the ``fanout`` and ``suffix`` chunk key encodings with zarr;
:func:`open_array` and :func:`create_array` add the ``concat-parts`` storage transformer.
"""

from zarrfuse.api.arrays import create_array, open_array
from zarrfuse.tiff.arrays import create_tiff_array

__all__ = ["__version__", "create_array", "create_tiff_array", "open_array"]
__version__ = "0.1.0"
