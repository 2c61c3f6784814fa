"""Options of ``http(s)://`` sources (issue 32, point 6: web servers through obstore): fsspec's
``headers`` is sent with every request, as a mapping or as ``Name: value`` lines (what a
command line can give); any other option is refused in one line, before a request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from zarrfuse.api.arrays import open_store_path
from zarrfuse.errors import ConfigurationError
from zarrfuse.storage import backend_for
from zarrfuse.zarr_compat import sync

TOKEN = "Bearer s3cr3t"


class _Guarded(BaseHTTPRequestHandler):
    """Serves ``/zarr.json`` to requests that carry the token; 403 to others."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        allowed = self.headers.get("Authorization") == TOKEN
        body = b'{"zarr_format": 3, "node_type": "group"}' if allowed else b""
        self.send_response(200 if allowed else 403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _document(url: str, options: dict | None) -> bytes | None:
    store_path = sync(open_store_path(url, mode="r", storage_options=options))
    found = backend_for(store_path.store).read_document("zarr.json")
    return None if found is None else found.data


@pytest.mark.parametrize("headers", [{"Authorization": TOKEN},
                                     f"Authorization: {TOKEN}\nX-Other: 1"])
def test_headers_go_with_every_request(guarded, headers):
    assert b'"group"' in (_document(guarded, {"headers": headers}) or b"")


def test_without_the_header_the_403_is_an_error_not_an_absence(guarded):
    with pytest.raises(OSError, match=r"lacked the necessary privileges|403"):
        _document(guarded, None)


def test_an_unknown_option_is_refused_before_any_request(guarded):
    with pytest.raises(ConfigurationError, match=r"unknown storage option client_kwargs .*"
                                                 r"known: headers"):
        _document(guarded, {"client_kwargs": "x"})
