"""Storage for the mount: raw key I/O on a local directory, an object store or web server
(obstore), or any zarr Store, behind the ``Backend`` interface (``base``); nothing here
knows about FUSE."""

from __future__ import annotations

from pathlib import Path

from zarr.abc.store import Store
from zarr.storage import LocalStore, ObjectStore

from zarrfuse.storage.base import Backend, PartReader
from zarrfuse.storage.local import LocalBackend
from zarrfuse.storage.store_requests import StoreRequests
from zarrfuse.storage.stores import StoreBackend, fsspec_protocols

__all__ = ["Backend", "PartReader", "backend_for", "cache_identity"]


def backend_for(
    store: Store,
    *,
    symlink_root: str | None = None,
    path: str = "",
    write_time: float | None = None,
) -> Backend:
    """The fastest backend that serves ``store`` exactly. ``path``: the mounted node's path
    in ``store``, where an object store keeps its journal. ``write_time``: the
    ``--store-timeout`` of writes and reads, on a store client of this backend's own."""
    if isinstance(store, LocalStore):
        return LocalBackend(
            Path(store.root), symlink_root=Path(symlink_root) if symlink_root else None
        )
    if isinstance(store, ObjectStore):
        from zarrfuse.storage.objects import ObjectBackend  # noqa: PLC0415  (needs obstore)

        return ObjectBackend(store.store, journal_path=path, write_time=write_time)
    return StoreBackend(store, StoreRequests(timeout=write_time))


def cache_identity(store: Store) -> str | None:
    """What names ``store`` in a disk cache (its kind, endpoint, bucket and prefix, or its
    URL), so that blocks of two stores never mix; None for a store it cannot name (a local
    directory, a zip file). Only a remote backend's bytes are worth caching (the mount's)."""
    if isinstance(store, ObjectStore):
        from zarrfuse.storage.objects import is_web_store  # noqa: PLC0415  (needs obstore)

        inner = store.store
        if is_web_store(inner):
            return f"obstore:HTTPStore:{inner.url}"
        config = getattr(inner, "config", None) or {}
        where = {k: v for k, v in sorted(config.items()) if k in _IDENTIFYING}
        return f"obstore:{type(inner).__name__}:{where}:{getattr(inner, 'prefix', None) or ''}"
    protocols = fsspec_protocols(store)
    if protocols and getattr(store, "path", None) is not None:
        return f"fsspec:{protocols[0]}:{store.path}"  # type: ignore[attr-defined]
    return None


_IDENTIFYING = {"endpoint", "bucket", "region", "container_name", "account_name", "url"}
"""Object store settings that say where the bytes are (never credentials)."""
