"""Dual-access arrays: Zarr arrays whose shards are also valid tiled TIFF files.

Built on ``extensions`` and ``api``; importing it registers the chunk finisher that gives
every shard written through the concat-parts store its TIFF header. The public functions
are importable from here.

Also here, for ``--format ome-tiff`` (one whole-image OME-TIFF per array): ``whole_image``
(the file's byte plan) and ``ome_xml`` (its OME-XML); import them from their modules.
"""

from zarrfuse.extensions.chunk_finishers import register_chunk_finisher
from zarrfuse.tiff.arrays import (
    convert_to_tiff_array,
    create_tiff_array,
    repair_tiff_headers,
    shard_format_of,
)
from zarrfuse.tiff.metadata import shard_format_for

# The one registration: shards of dual-access arrays get their TIFF header whenever the
# concat-parts store writes them (the mount's chunk writes ask shard_format_for themselves).
register_chunk_finisher(shard_format_for)

__all__ = ["convert_to_tiff_array", "create_tiff_array", "repair_tiff_headers", "shard_format_of"]
