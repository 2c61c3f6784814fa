"""The filesystem without FUSE: which paths exist (namespace, catalog, views), what a file's
bytes are (chunk sources, rendering) and how writes become chunks (commits, scratch files).

Blocking storage calls go to worker threads through trio; nothing here imports pyfuse3, so
the whole filesystem can be driven by tests without a kernel in the loop.
"""
