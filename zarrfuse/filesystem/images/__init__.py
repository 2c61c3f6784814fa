"""Chunks and arrays as image files: rendered chunks and whole-image OME-TIFFs. Built on
``chunks``; knows nothing of paths or the mount's tree."""
