"""Storage for the mount: raw key I/O on a local directory, S3, or any zarr Store.

Nothing here knows about FUSE or the filesystem above; the filesystem talks to the
``Backend`` interface (``base``) and never to a store directly.
"""

from __future__ import annotations

from pathlib import Path

from zarr.abc.store import Store
from zarr.storage import LocalStore, ObjectStore

from zarrfuse.storage.base import Backend, PartReader
from zarrfuse.storage.local import LocalBackend
from zarrfuse.storage.stores import StoreBackend

__all__ = ["Backend", "PartReader", "backend_for"]


def backend_for(
    store: Store, *, symlink_root: str | None = None, path: str = ""
) -> Backend:
    """The fastest backend that serves ``store`` exactly. ``symlink_root``: see
    ``LocalBackend`` (local stores only). ``path``: the mounted node's path in ``store``,
    where an object store keeps its commit journal (a bucket holds many arrays)."""
    if isinstance(store, LocalStore):
        return LocalBackend(
            Path(store.root), symlink_root=Path(symlink_root) if symlink_root else None
        )
    if isinstance(store, ObjectStore):
        from zarrfuse.storage.objects import ObjectBackend  # noqa: PLC0415  (needs obstore)

        return ObjectBackend(store.store, journal_path=path)
    return StoreBackend(store)
