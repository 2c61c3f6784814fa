"""The no-mount API: open and create Zarr v3 arrays that use zarrfuse's extensions.

``fanout`` and ``suffix`` need nothing here (zarr finds them through entry points); this module
exists for ``concat-parts``, which zarr-python refuses, and for clear errors on bad sources.
"""

from __future__ import annotations

import os
import stat
import urllib.parse
from typing import Any, Literal

import zarr
from zarr.abc.store import Store
from zarr.storage import StorePath, ZipStore

from zarrfuse.api.cloud import is_cloud_url, open_cloud
from zarrfuse.api.nodes import V2_NAMES, V3_NAME, StoredNode, parse_array_metadata, parse_node
from zarrfuse.api.s3 import is_s3_url, open_s3
from zarrfuse.errors import ConfigurationError, SourceError, ZarrFuseError
from zarrfuse.extensions.concat_parts_store import ConcatPartsStore
from zarrfuse.extensions.transformers import ConcatParts, parse_storage_transformers
from zarrfuse.limits import MAX_DOCUMENT_BYTES
from zarrfuse.zarr_compat import default_buffer_prototype, make_store_path, sync

__all__ = [
    "create_array", "open_array", "open_store_path", "read_node", "read_node_metadata",
    "wrap_array"
]

AccessMode = Literal["r", "r+", "a"]


def _local_path(source: Any) -> Any:
    """``file://`` URLs as plain paths: zarr would open them through fsspec, while a plain
    path gets a ``LocalStore`` (and the mount its fast local backend)."""
    if isinstance(source, str) and source.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(source).path)
    return source


def _local_zip(source: Any) -> str | None:
    """The local path of a ``.zip`` store (zarr's ``make_store_path`` would treat it as a
    directory), or None."""
    if not isinstance(source, str | os.PathLike):
        return None
    path = os.fspath(source)
    if path.endswith(".zip") and "://" not in path:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such zip file: {path}")
        return path
    return None


async def open_store_path(
    source: Any, *, mode: str = "r", storage_options: dict[str, Any] | None = None,
    allow_redirects: bool = False,
) -> StorePath:
    """A zarr ``StorePath`` for a path, URL, ``.zip`` file or Store."""
    source = _local_path(source)
    try:
        zip_path = _local_zip(source)
        if zip_path is not None:
            store = ZipStore(zip_path, mode="r" if mode == "r" else "a", read_only=mode == "r")
            await store._ensure_open()
            return StorePath(store)
        if is_s3_url(source):
            return open_s3(source, read_only=mode == "r", storage_options=storage_options)
        if is_cloud_url(source):
            return open_cloud(source, read_only=mode == "r", storage_options=storage_options,
                              allow_redirects=allow_redirects)
        return await make_store_path(source, mode=mode, storage_options=storage_options)  # type: ignore[arg-type]
    except ZarrFuseError:
        raise
    except FileNotFoundError as e:
        raise SourceError(f"{source}: no such store ({e})") from e
    except (ValueError, TypeError) as e:
        raise SourceError(f"{source}: cannot open as a Zarr store: {e}") from e


def check_local_document(store: Store, key: str) -> None:
    """Refuse, before zarr opens it, a local document that is not a regular file (a FIFO
    would block the reader forever, ``/dev/zero`` fill its memory) or is over
    ``MAX_DOCUMENT_BYTES``. Absent documents pass (zarr answers None)."""
    if not isinstance(store, zarr.storage.LocalStore):
        return
    path = os.path.join(store.root, key)
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        raise SourceError(f"{path}: cannot read this metadata document: {e.strerror}") from e
    if not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode):
        raise SourceError(f"{path}: a FIFO, socket or device, not a metadata document")
    if found.st_size > MAX_DOCUMENT_BYTES:
        raise SourceError(f"{path}: {found.st_size} bytes, over the {MAX_DOCUMENT_BYTES} a "
                          "metadata document may have")


async def read_node(store_path: StorePath) -> StoredNode:
    """The node at ``store_path``: its ``zarr.json``, else its Zarr v2 documents."""
    where = f"{store_path.store}/{store_path.path}".rstrip("/")
    prototype = default_buffer_prototype()

    async def get(name: str) -> bytes | None:
        key = f"{store_path.path}/{name}" if store_path.path else name
        check_local_document(store_path.store, key)
        found = await store_path.store.get(key, prototype)
        return None if found is None else found.to_bytes()

    v3 = await get(V3_NAME)
    if v3 is not None:
        return parse_node(where, {V3_NAME: v3})
    return parse_node(where, {name: await get(name) for name in V2_NAMES})


async def read_node_metadata(store_path: StorePath) -> dict[str, Any]:
    """The node's metadata as one v3-shaped document (v2 nodes converted; see ``nodes``)."""
    return (await read_node(store_path)).metadata


def wrap_array(store_path: StorePath, metadata: dict[str, Any], *, writable: bool) -> StorePath:
    """The store path zarr should open: wrapped in the array's storage transformer, if any."""
    parts = parse_storage_transformers(metadata.get("storage_transformers"))
    if parts is None:
        return store_path
    if writable:
        parts.check_writable()
    store = ConcatPartsStore(
        store_path.store, array_path=store_path.path, parts=parts, metadata=metadata
    )
    return StorePath(store, store_path.path)


def open_array(
    source: str | Store | StorePath | Any,
    *,
    mode: AccessMode = "r",
    storage_options: dict[str, Any] | None = None,
) -> zarr.Array:
    """Open any Zarr array, v3 or v2, applying a ``concat-parts`` storage transformer if any.

    ``source`` is a local path, a URL zarr-python understands (``file://``, ``s3://``, a
    ``.zip`` file) or a zarr Store. Raises :class:`~zarrfuse.errors.SourceError` or
    :class:`~zarrfuse.errors.ConfigurationError` with the reason when it cannot.
    """
    if mode not in ("r", "r+", "a"):
        raise ValueError(f"mode must be 'r', 'r+' or 'a', got {mode!r}")
    store_path = sync(open_store_path(source, mode=mode, storage_options=storage_options))
    node = sync(read_node(store_path))
    if node.node_type != "array":
        raise SourceError(f"{source}: is a Zarr group, not an array")
    if node.zarr_format == 2:
        return zarr.open_array(store_path, mode=mode, zarr_format=2)
    parse_array_metadata(str(source), node.metadata)  # a clear error, naming the field
    wrapped = wrap_array(store_path, node.metadata, writable=mode != "r")
    return zarr.open_array(wrapped, mode=mode, zarr_format=3)


def create_array(
    store: str | Store | StorePath | Any,
    *,
    storage_transformers: list[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> zarr.Array:
    """``zarr.create_array`` plus ``storage_transformers``, written into ``zarr.json``.

    Takes every keyword argument of :func:`zarr.create_array`. With a ``concat-parts``
    transformer, chunks written now or later (through :func:`open_array`) are split into parts.
    """
    parts: ConcatParts | None = parse_storage_transformers(storage_transformers)
    if parts is None and not (is_s3_url(store) or is_cloud_url(store)):
        return zarr.create_array(store, **kwargs)
    storage_options = kwargs.pop("storage_options", None)
    mode = "w" if kwargs.get("overwrite") else "a"
    store_path = sync(open_store_path(store, mode=mode, storage_options=storage_options))
    if parts is None:  # an object store URL: through zarrfuse's obstore client, not fsspec's
        return zarr.create_array(store_path, **kwargs)
    parts.check_writable()
    if kwargs.get("zarr_format", 3) != 3:
        raise ConfigurationError("storage transformers need zarr_format 3")
    name = kwargs.pop("name", None) or ""
    array_path = "/".join(p for p in (store_path.path, name.strip("/")) if p)
    wrapper = ConcatPartsStore(store_path.store, array_path=array_path, parts=parts)
    return zarr.create_array(StorePath(wrapper, array_path), **kwargs)
