"""Dual-access arrays: Zarr arrays whose shards are also valid tiled TIFF files.

Built on ``extensions`` and ``api``; importing it registers the chunk finisher that gives
every shard written through the concat-parts store its TIFF header.
"""
