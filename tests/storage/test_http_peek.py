"""One GET that tells a web server key's size and time and brings a small object's bytes
(issue 32, points 3 and 5): what the next chunk files are fetched ahead with, so that a
tool copying a directory pays no HEAD and no second request per file."""

from __future__ import annotations

import errno
import os

import fsspec
import pytest

from tests.http_servers import MisbehavingServer, nginx
from zarrfuse.storage.http_prefetch import NotPeeked, PeekedObjects
from zarrfuse.storage.http_stat import http_peek, http_stat
from zarrfuse.zarr_compat import sync


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    (root / "small").write_bytes(bytes(range(256)) * 4)
    (root / "large").write_bytes(os.urandom(5000))
    (root / "empty").write_bytes(b"")
    with nginx(root, tmp_path_factory.mktemp("nginx")) as url:
        yield url


def _peek(url: str, limit: int = 4096):
    fs = fsspec.filesystem("http", asynchronous=True)
    return sync(http_peek(fs, url, limit, 7))


def _head(url: str):
    return sync(http_stat(fsspec.filesystem("http", asynchronous=True), url, 7))


def test_a_small_object_comes_whole_with_the_size_and_time_a_head_gives(site):
    stat, body = _peek(f"{site}/small")
    assert body == bytes(range(256)) * 4
    assert stat == _head(f"{site}/small")  # size and Last-Modified alike
    assert stat.mtime_ns != 7


def test_a_larger_object_says_its_size_and_brings_no_bytes(site):
    stat, body = _peek(f"{site}/large")
    assert stat.size == 5000 and body is None


def test_an_empty_object_is_empty_not_an_error(site):
    stat, body = _peek(f"{site}/empty")
    assert stat.size == 0 and body == b""


def test_an_absent_key_is_none(site):
    assert _peek(f"{site}/nothing-here") is None


@pytest.mark.parametrize("mode", ["500", "truncate"])
def test_a_server_error_or_a_body_cut_short_is_eio_never_absent(tmp_path, mode):
    (tmp_path / "k").write_bytes(b"x" * 1000)
    with MisbehavingServer(tmp_path) as server:
        server.modes["k"] = mode
        with pytest.raises(OSError) as raised:
            _peek(f"{server.url}/k")
        assert raised.value.errno == errno.EIO


def test_peeked_objects_answer_a_lookup_and_then_the_reads_once(site):
    asked = []

    def peek(key: str):
        asked.append(key)
        return _peek(f"{site}/{key}")

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
