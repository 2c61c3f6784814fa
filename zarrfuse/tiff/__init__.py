"""Dual-access arrays: Zarr arrays whose shards are also valid tiled TIFF files; importing
it registers the chunk finisher that gives every such shard its TIFF header. Also the
whole-image file of ``--format ome-tiff`` (``whole_image``, ``ome_xml``).
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
