"""What one request to a web server tells (issue 32, points 3, 5 and 6): one GET gives a key's
size and time and brings a small object's bytes, what the next chunk files are fetched ahead
with, so that a tool copying a directory pays no HEAD and no second request per file; only
404 and 410 mean absent, and every other failure is EIO, never a fill value."""

from __future__ import annotations

import errno
import functools
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.http_servers import MisbehavingServer, nginx
from zarrfuse.api.arrays import open_store_path
from zarrfuse.storage import backend_for
from zarrfuse.storage.http_prefetch import NotPeeked, PeekedObjects
from zarrfuse.storage.objects import ObjectBackend
from zarrfuse.zarr_compat import sync


def _web(url: str) -> ObjectBackend:
    store_path = sync(open_store_path(url, mode="r"))
    backend = backend_for(store_path.store, path=store_path.path)
    assert isinstance(backend, ObjectBackend) and backend.web
    return backend


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    (root / "small").write_bytes(bytes(range(256)) * 4)
    (root / "large").write_bytes(os.urandom(5000))
    (root / "empty").write_bytes(b"")
    with nginx(root, tmp_path_factory.mktemp("nginx")) as url:
        yield _web(url)


def _peek(backend: ObjectBackend, key: str, limit: int = 4096):
    return backend._send_peek(key, limit).result(30)


def test_a_small_object_comes_whole_with_the_size_and_time_a_head_gives(site):
    stat, body = _peek(site, "small")
    assert body == bytes(range(256)) * 4
    assert stat == site.stat("small")  # size, Last-Modified and ETag alike
    assert stat.mtime_ns > 0


def test_a_larger_object_says_its_size_and_brings_no_bytes(site):
    stat, body = _peek(site, "large")
    assert stat.size == 5000 and body is None


def test_an_empty_object_is_empty_not_an_error(site):
    stat, body = _peek(site, "empty")
    assert stat.size == 0 and body == b""
    assert site.read_all("empty") == b""


def test_an_absent_key_is_none(site):
    assert _peek(site, "nothing-here") is None
    assert site.stat("nothing-here") is None
    assert site.read_all("nothing-here") is None
    assert site.read_document("nothing-here") is None


def test_a_web_server_is_never_listed(site):
    assert not site.capabilities.can_list and not site.capabilities.stat_by_listing


@pytest.mark.parametrize("mode", ["500", "truncate", "loop", "long-length", "short-length"])
def test_a_server_error_or_a_body_cut_short_is_eio_never_absent(tmp_path, mode):
    """``short-length`` (issue 52): a Content-Length 100 bytes short of the body sent, whose
    whole GET read the 900 bytes it announced, without a word."""
    (tmp_path / "k").write_bytes(b"x" * 1000)
    with MisbehavingServer(tmp_path) as server:
        server.modes["k"] = mode
        backend = _web(server.url)
        for ask in (lambda: _peek(backend, "k"), lambda: backend.read_all("k"),
                    lambda: backend.read_range("k", 0, 10)):
            with pytest.raises(OSError) as raised:
                ask()
            assert raised.value.errno == errno.EIO
        if mode in ("500", "loop"):  # the body's faults show on GETs only
            with pytest.raises(OSError) as raised:
                backend.stat("k")
            assert raised.value.errno == errno.EIO


@pytest.fixture
def statuses(tmp_path):
    """A web server answering ``/404``, ``/410``, ``/401`` and ``/403`` with that status."""
    with MisbehavingServer(tmp_path) as server:
        server.modes.update({status: status for status in ("404", "410", "401", "403")})
        yield _web(server.url)


def test_410_is_absent_and_403_is_an_error(statuses):
    assert statuses.stat("410") is None and statuses.stat("404") is None
    assert statuses.read_all("410") is None and _peek(statuses, "410") is None
    for key in ("403", "401"):
        with pytest.raises(OSError) as raised:
            statuses.stat(key)
        assert raised.value.errno == errno.EIO


def test_peeked_objects_answer_a_lookup_and_then_the_reads_once(site):
    asked = []

    def peek(key: str):
        asked.append(key)
        return site._send_peek(key, 4096)

    peeked = PeekedObjects(peek)
    try:
        peeked.want(["small", "nothing-here", "small"])
        assert peeked.stat("nothing-here") is None
        stat = peeked.stat("small")
        assert stat is not None and stat.size == 1024
        assert peeked.read("small", 0, 100) == (bytes(range(256)) * 4)[:100]
        assert peeked.read("small", 100, 1024) == (bytes(range(256)) * 4)[100:]
        assert isinstance(peeked.stat("small"), NotPeeked)  # read to its end: let go
        assert isinstance(peeked.stat("never-wanted"), NotPeeked)
        assert sorted(asked) == ["nothing-here", "small"]  # each key asked once
    finally:
        peeked.close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_ignores_ranges_is_read_whole_and_exact(tmp_path):
    """Python's http.server answers a ranged GET with the whole object (200), which obstore
    refuses: reads of a part, its tail and sequential windows ahead are cut from the object
    fetched whole, byte for byte."""
    data = os.urandom(3 << 20)
    (tmp_path / "obj").write_bytes(data)
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = _web(f"http://127.0.0.1:{server.server_address[1]}")
        assert bytes(backend.read_range("obj", 10, 5000)) == data[10:5000]
        assert backend.read_tail("obj", 100) == (memoryview(data[-100:]), len(data))
        reader = backend.open_reader(["obj"])
        out = bytearray(len(data))
        try:
            for at in range(0, len(data), 128 << 10):  # sequential: windows go ahead
                piece = memoryview(out)[at : at + (128 << 10)]
                done = reader.read_into_nowait(0, at, piece)
                if done < len(piece):
                    reader.read_into(0, at + done, piece[done:])
        finally:
            reader.close()
        assert bytes(out) == data
    finally:
        server.shutdown()
        server.server_close()
