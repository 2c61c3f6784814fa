"""A chunk's bytes: which chunks exist, their caches, batch decoding and the write check.
Nothing here knows paths, files or images: the layers above address chunks by coordinates."""
