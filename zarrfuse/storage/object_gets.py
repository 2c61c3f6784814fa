"""The requests of an object store or a web server as coroutines for the mount's store
client: the only module that calls obstore. Every GET's answer is checked against the size
it announces or was asked for, and its body read no further than asked (why, and the
``bytes=0-`` whole GET of a web server: docs/sources.md, "Web servers")."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import obstore

if TYPE_CHECKING:  # types only: obstore declares them in its stubs
    from obstore import GetResult, ListResult, ObjectMeta

from zarrfuse.storage.base import Stat
from zarrfuse.storage.store_requests import ignores_ranges, is_absent

__all__ = [
    "COMMIT_ATTRIBUTE",
    "Got",
    "WebRanges",
    "checked",
    "copy",
    "delete",
    "get_range",
    "get_tail",
    "get_version",
    "get_whole",
    "head",
    "list_dir",
    "peek",
    "put",
    "sign",
    "stat_of",
]

Data = TypeVar("Data", bytes, memoryview)


async def get_range(store: Any, key: str, start: int, stop: int) -> memoryview:
    """Bytes ``[start, stop)``. A server that ignores ranges answers with the whole object,
    which obstore refuses (NotSupportedError, raised here: ``get_version`` fetches the
    object whole instead)."""
    result = await obstore.get_async(store, key, options={"range": (start, stop)})
    return memoryview(checked(key, await _first(result, stop - start + 1), stop - start))


async def get_whole(store: Any, key: str, ranges: WebRanges | None = None) -> bytes:
    """The whole object (FileNotFoundError if absent); ``ranges``: a web server's (see
    ``WebRanges``)."""
    result = await _get_all(store, key, ranges)
    return checked(key, await _first(result, _size(result) + 1), _size(result))


async def get_tail(store: Any, key: str, count: int) -> tuple[memoryview, int]:
    """The last ``count`` bytes (all of a smaller object) and the object's size; from the
    object fetched whole where the server ignores ranges."""
    try:
        result = await obstore.get_async(store, key, options={"range": {"suffix": count}})
    except Exception as e:
        if not ignores_ranges(e):
            raise
        whole = memoryview(await get_whole(store, key))
        return whole[max(len(whole) - count, 0):], len(whole)
    first, stop = result.range
    tail = checked(key, await _first(result, count + 1), stop - first)
    return memoryview(tail), int(result.meta["size"])


async def peek(store: Any, key: str, limit: int, ranges: WebRanges | None = None
               ) -> tuple[Stat, bytes | None] | None:
    """The key's stat and, if it has at most ``limit`` bytes, its bytes, in one GET; None
    if absent. A larger object's body is not read."""
    try:
        result = await _get_all(store, key, ranges)
    except Exception as e:
        if is_absent(e):
            return None
        raise
    found = stat_of(result.meta)
    if found.size > limit:
        return found, None
    return found, checked(key, await _first(result, found.size + 1), found.size)


class WebRanges:
    """Whether a web server answers ranges, learnt from its first whole GET: one per
    backend (what one mount learns of its server, another learns of its own)."""

    ignored = False
    """Seen answering a ranged GET of a non-empty object whole: whole objects are then
    asked without a range, one request each."""


async def _get_all(store: Any, key: str, ranges: WebRanges | None) -> GetResult:
    """A GET of the whole object: from a web server (``ranges``) as the range ``bytes=0-``,
    unless it ignores ranges or the object is empty (nginx answers that range whole, others
    416); object stores without a range."""
    if ranges is not None and not ranges.ignored:
        try:
            return await obstore.get_async(store, key, options={"range": {"offset": 0}})
        except Exception as e:
            if not ignores_ranges(e) and "416 Range Not Satisfiable" not in str(e):
                raise
    result = await obstore.get_async(store, key)
    if result.meta["size"] and ranges is not None:
        ranges.ignored = True
    return result


def _size(result: GetResult) -> int:
    """The bytes a GET's body must have: its range (Content-Range, or Content-Length)."""
    first, stop = result.range
    return stop - first


async def _first(result: GetResult, most: int) -> bytes:
    """The first ``most`` bytes of a GET's body (all of a shorter one), and at most one
    frame more: the rest is never received (the connection is dropped with it)."""
    try:
        return await anext(aiter(result.stream(min_chunk_size=max(most, 1))))
    except StopAsyncIteration:  # an empty body
        return b""


def checked(key: str, data: Data, size: int) -> Data:
    """``data`` if it has the ``size`` bytes asked for; EIO if the object was replaced by a
    shorter one, or the server sent another length than it announced."""
    if len(data) > size:
        raise OSError(errno.EIO, f"{key}: the server sent more than the {size} bytes its "
                                 "answer announced (a wrong Content-Length or Content-Range)")
    if len(data) != size:
        raise OSError(errno.EIO, f"{key}: asked for {size} bytes, got {len(data)} (the object "
                                 "replaced meanwhile, or a wrong Content-Length)")
    return data


def stat_of(meta: ObjectMeta) -> Stat:
    """Size and ``LastModified`` of an object, as a listing, a HEAD or a GET gives them."""
    modified = meta["last_modified"]
    mtime_ns = int(modified.timestamp()) * 1_000_000_000 + modified.microsecond * 1000
    return Stat(meta["size"], mtime_ns, meta.get("e_tag"))


COMMIT_ATTRIBUTE = "zarrfusecommit"
"""The user metadata naming the journal commit that wrote a part (``object_journal``):
lowercase letters only, a name S3, GCS and Azure (C# identifiers) all keep as given."""


class Got(NamedTuple):
    """Bytes of an object and what names their version: its size, ETag and commit."""

    data: memoryview
    size: int
    etag: str | None
    commit: str | None


async def get_version(
    store: Any, key: str, start: int, stop: int, etag: str | None = None
) -> Got:
    """Bytes ``[start, stop)`` with their version (an empty range: a HEAD); ``etag``: of
    that version only, EIO once it was replaced. From the whole object where the server
    ignores ranges (its body read no further than ``stop``)."""
    pinned: Any = {} if etag is None else {"if_match": etag}
    ranged: Any = {**pinned, "range": (start, stop)} if stop > start else {**pinned, "head": True}
    try:
        try:
            result = await obstore.get_async(store, key, options=ranged)
            data = memoryview(await _first(result, stop - start + 1))
        except Exception as e:
            if not ignores_ranges(e):
                raise
            result = await obstore.get_async(store, key, options=pinned)
            data = memoryview(await _first(result, stop))[start:stop]
    except Exception as e:
        if type(e).__name__ == "PreconditionError":
            raise OSError(errno.EIO, f"{key}: replaced in the store since this file was "
                                     "opened; its version is gone (open it again)") from e
        raise
    return Got(checked(key, data, stop - start), int(result.meta["size"]),
               result.meta.get("e_tag"), result.attributes.get(COMMIT_ATTRIBUTE))


# --- the other requests -----------------------------------------------------------------


async def list_dir(store: Any, prefix: str | None) -> ListResult[Sequence[ObjectMeta]]:
    """The objects and common prefixes directly under ``prefix`` (one LIST, paged)."""
    return await obstore.list_with_delimiter_async(store, prefix)


async def head(store: Any, key: str) -> ObjectMeta:
    """The object's metadata (FileNotFoundError if absent)."""
    return await obstore.head_async(store, key)


async def put(store: Any, key: str, data: bytes, attributes: dict[str, str] | None = None,
              *, within: float | None = None) -> None:
    """One PUT of the whole object (atomic: readers see the old or the new bytes), with
    ``attributes`` as its user metadata; EIO without an answer ``within`` seconds."""
    try:
        await asyncio.wait_for(obstore.put_async(store, key, data, use_multipart=False,
                                                 attributes=attributes or {}), within)
    except TimeoutError:
        raise OSError(errno.EIO, f"PUT {key}: no answer within the write's time "
                                 "(--store-timeout)") from None


async def delete(store: Any, keys: str | Sequence[str]) -> None:
    """Remove one object, or many in one bulk request."""
    await obstore.delete_async(store, keys if isinstance(keys, str) else list(keys))


async def copy(store: Any, source: str, key: str) -> None:
    """Replace ``key`` with a copy of ``source``, made by the server."""
    await obstore.copy_async(store, source, key)


def sign(store: Any, method: Literal["PUT", "DELETE"], key: str, expires: int) -> str:
    """A URL that lets ``method`` on ``key`` for ``expires`` seconds (no request made)."""
    return obstore.sign(store, method, key, timedelta(seconds=expires))
