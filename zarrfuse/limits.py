"""Bounds on what an untrusted store may make the daemon read into memory."""

from __future__ import annotations

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_VERIFIED_DECODE", "REDIRECT_TRAP"]

MAX_DOCUMENT_BYTES = 256 << 20
"""Largest metadata document read (``zarr.json``, the v2 documents, consolidated metadata):
each is read whole into memory, so a store's ``/dev/zero`` or a 4 GB ``zarr.json`` is
refused with one line instead of filling it. Consolidated metadata of very large
hierarchies stays well under this."""

REDIRECT_TRAP = "127.0.0.1:0"
"""Where a web source's requests to any other host than its own go (the HTTP client's proxy,
with the source's host excepted): a port nothing can listen on, so a redirect to another
host is refused, and its error names this address (``store_requests`` says so in words)."""

MAX_VERIFIED_DECODE = 2 << 30
"""Largest chunk a writable mount decodes to check a write before storing it: the decoded
chunk is held whole, so a chunk of a sparse 100 GiB grid cell is refused (EIO, one line
naming ``--no-verify``) instead of filling memory. The same bound as the rendered views'
default ``--max-chunk-bytes``."""
