"""Bounds on what an untrusted store may make the daemon read into memory."""

from __future__ import annotations

__all__ = ["MAX_DOCUMENT_BYTES"]

MAX_DOCUMENT_BYTES = 256 << 20
"""Largest metadata document read (``zarr.json``, the v2 documents, consolidated metadata):
each is read whole into memory, so a store's ``/dev/zero`` or a 4 GB ``zarr.json`` is
refused with one line instead of filling it. Consolidated metadata of very large
hierarchies stays well under this."""
