"""A chunk's bytes: chunk sources (which chunks exist, sizes, parts), their caches, decoding
many chunks at once, and the check a chunk's bytes must pass before they are stored.

Nothing here knows paths, files or images: the layers above address chunks by coordinates.
"""
