"""Chunks and arrays as image files: formats, rendering a chunk to TIFF/NPY/PNG and back,
rendered sources, and whole-image OME-TIFF files built from an array or an OME-Zarr pyramid.

Built on ``chunks``; knows nothing of paths or the mount's tree.
"""
