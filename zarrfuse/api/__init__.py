"""The no-mount API: open and create arrays that use zarrfuse's extensions, with plain
zarr-python. Needs neither pyfuse3 nor trio, and imports nothing above ``extensions``."""

from zarrfuse.api.arrays import (
    create_array,
    open_array,
    open_store_path,
    read_node_metadata,
    wrap_array,
)

__all__ = ["create_array", "open_array", "open_store_path", "read_node_metadata", "wrap_array"]
