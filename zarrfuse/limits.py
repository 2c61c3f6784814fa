"""Bounds on what an untrusted store may make the daemon read into memory."""

from __future__ import annotations

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_VERIFIED_DECODE", "REDIRECT_TRAP"]

MAX_DOCUMENT_BYTES = 256 << 20
"""Largest metadata document read whole into memory (a store's ``/dev/zero`` or a 4 GB
``zarr.json`` is refused with one line instead)."""

REDIRECT_TRAP = "127.0.0.1:0"
"""The HTTP client's proxy for any host but the source's: a port nothing listens on, so a
redirect to another host is refused (``store_requests`` says so in words)."""

MAX_VERIFIED_DECODE = 2 << 30
"""Largest chunk a writable mount decodes to check a write (held whole in memory; beyond:
EIO naming ``--no-verify``), as the rendered views' default ``--max-chunk-bytes``."""
