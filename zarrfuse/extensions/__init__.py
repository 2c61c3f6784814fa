"""zarr-python extensions: the ``fanout`` and ``suffix`` chunk key encodings (registered
through entry points) and the ``concat-parts`` storage transformer (a ``WrapperStore``).

Plain zarr-python code: no pyfuse3, no trio, and nothing of the rest of zarrfuse but its
error types. Installable anywhere zarr is.
"""
