"""What one key of a web server is: its size and time, absent, or an error; one HEAD, or
one GET that brings a small object's bytes too (``http_peek``).

fsspec's HTTP ``info`` turns every failure into FileNotFoundError (a 500, a redirect loop, a
refused connection), and "not found" means "absent" to a Zarr reader: a rendered chunk would
show the fill value where the server failed. Here only 404 and 410 mean absent; any other
failure is EIO with the server's reason, and nothing is learnt from it.
"""

from __future__ import annotations

import errno
from email.utils import parsedate_to_datetime
from typing import Any

from zarrfuse.storage.base import Stat

__all__ = ["ABSENT_STATUSES", "http_peek", "http_stat"]

ABSENT_STATUSES = (404, 410)
"""Answers that mean "no such key". A 403 is an error: some servers give it for keys that
do not exist, but it also means "not allowed", and reading that as fill values would be a
silent wrong read."""


async def http_stat(fs: Any, url: str, fallback_time_ns: int) -> Stat | None:
    """``url``'s size and Last-Modified time (HEAD, redirects followed) through the fsspec
    HTTP filesystem ``fs``'s session; None if absent; OSError(EIO) for any other answer."""
    session = await fs.set_session()
    try:
        async with session.head(fs.encode_url(url), allow_redirects=True, **fs.kwargs) as r:
            status, reason = r.status, r.reason
            length, modified = r.content_length, r.headers.get("Last-Modified")
    except Exception as e:  # refused, reset, a redirect loop, a timeout: the server failed
        raise OSError(errno.EIO, f"{url}: {type(e).__name__}: {e}") from e
    if status in ABSENT_STATUSES:
        return None
    if not 200 <= status < 300:
        raise OSError(errno.EIO, f"{url}: HTTP {status} {reason or ''}".rstrip())
    if length is None:  # no Content-Length on HEAD: fsspec asks with a GET
        info = await fs._info(url)
        length = info.get("size")
        if length is None:
            raise OSError(errno.EIO, f"{url}: the server gives no size")
    return Stat(int(length), _time_ns(modified) or fallback_time_ns)


async def http_peek(
    fs: Any, url: str, limit: int, fallback_time_ns: int
) -> tuple[Stat, bytes | None] | None:
    """``url``'s size and time, and its bytes if it has at most ``limit`` of them, in one
    GET asking for its first ``limit`` bytes; None if absent; OSError(EIO) for any other
    answer. A server that ignores ranges (200) sends the object whole: a larger one's body
    is not read."""
    session = await fs.set_session()
    kwargs = dict(fs.kwargs)
    headers = {**kwargs.pop("headers", {}), "Range": f"bytes=0-{limit - 1}"}
    try:
        async with session.get(fs.encode_url(url), allow_redirects=True, headers=headers,
                               **kwargs) as r:
            status, reason = r.status, r.reason
            modified = r.headers.get("Last-Modified")
            if status in ABSENT_STATUSES:
                return None
            if status in (206, 416):  # 416: nothing to give from byte 0, an empty object
                total: int | None = _range_total(r.headers.get("Content-Range"))
            elif status == 200:
                total = r.content_length
            else:
                raise OSError(errno.EIO, f"{url}: HTTP {status} {reason or ''}".rstrip())
            if total is None:
                raise OSError(errno.EIO, f"{url}: the server gives no size")
            body = await r.read() if status != 416 and total <= limit else None
    except OSError:
        raise
    except Exception as e:  # refused, reset, a redirect loop, a timeout: the server failed
        raise OSError(errno.EIO, f"{url}: {type(e).__name__}: {e}") from e
    if body is not None and len(body) != total:
        raise OSError(errno.EIO, f"{url}: {len(body)} bytes sent of {total}")
    return Stat(total, _time_ns(modified) or fallback_time_ns), b"" if total == 0 else body


def _range_total(text: str | None) -> int | None:
    """The object's size in a Content-Range header (``bytes 0-99/1234``, ``bytes */0``)."""
    if not text or "/" not in text:
        return None
    total = text.rpartition("/")[2].strip()
    return int(total) if total.isdigit() else None


def _time_ns(text: str | None) -> int | None:
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return int(when.timestamp()) * 1_000_000_000
