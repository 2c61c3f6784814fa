"""The scenarios, by name: each a module of this package with ``ISSUE`` (whose floors its
rows hold by default) and ``measure(ctx, **params) -> list[Row]``; the docstring says what it
measures, against what, and its floors. A name maps to its module and parameters."""

from __future__ import annotations

SCENARIOS: dict[str, tuple[str, dict[str, object]]] = {
    "per-file": ("per_file", {}),
    "listing": ("listing", {}),
    "copies": ("copies", {}),
    "whole-image": ("whole_image", {}),
    "mount-read": ("mount_read", {}),
    "pace-http": ("pace", {"store": "http"}),
    "pace-s3": ("pace", {"store": "s3"}),
    "pace-azure": ("pace", {"store": "azure"}),
    "pace-gcs": ("pace", {"store": "gcs"}),
    "first-paint": ("first_paint", {}),
    "http-copy": ("http_copy", {}),
    "latency": ("latency", {}),
    "disk-cache-s3": ("disk_cache", {"store": "s3"}),
    "disk-cache-http": ("disk_cache", {"store": "http"}),
    "s3": ("s3", {}),
    "memory": ("memory", {}),
    "sparse": ("sparse", {}),
    "render": ("render", {}),
    "tiff-shards": ("tiff_shards", {}),
    "mount-write": ("mount_write", {}),
    "store-watch": ("store_watch", {}),
    "rendered-writes": ("rendered_writes", {}),
    "torture": ("torture", {}),
    "hostile": ("hostile", {}),
    "composite": ("composite", {}),
}
