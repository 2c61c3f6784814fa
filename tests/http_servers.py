"""Web servers for the HTTP source tests: a real nginx with its default configuration (no
directory listing), and a small server that misbehaves on purpose, both on loopback.

nginx runs in the foreground as a child of the test (``daemon off``), with its pid, logs and
temp directories under the test's own directory, and is killed in teardown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["HUGE_BYTES", "MisbehavingServer", "free_port", "nginx"]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

_CONFIG = """\
{user}daemon off;
pid {run}/nginx.pid;
error_log {run}/error.log;
events {{ }}
http {{
    log_format ranges '$remote_addr [$time_local] "$request" $status $body_bytes_sent '
                      '"$http_range" $msec';
    access_log {run}/access.log ranges;
    client_body_temp_path {run}/body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        {autoindex}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


@contextlib.contextmanager
def nginx(root: Path, run: Path, *, autoindex: bool = False) -> Iterator[str]:
    """nginx serving ``root`` (its defaults: no autoindex; ``autoindex``: directories listed
    as HTML, what rclone's http backend reads); yields the base URL."""
    run.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = run / "nginx.conf"
    # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 temp dirs.
    user = "user root;\n" if os.geteuid() == 0 else ""
    config.write_text(_CONFIG.format(user=user, run=run, port=port, root=root,
                                     autoindex="autoindex on;" if autoindex else ""))
    proc = subprocess.Popen([NGINX, "-c", str(config), "-e", str(run / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        _wait_listening(port, proc, 10)
        yield f"http://127.0.0.1:{port}"
    finally:
        # SIGTERM: nginx's fast shutdown, which ends its worker too. A SIGKILL of the master
        # alone left the worker running, holding the port, for the rest of the session.
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its group
        proc.wait(10)


HUGE_BYTES = 3 << 29
"""The body a ``huge-body`` or ``huge-range`` answer sends (1.5 GiB): a bound that buffers it
takes the daemon far past any sane RSS."""
LIAR_SECONDS = 30.0
"""How long a slow answer (``trickle``, ``slow-headers``, ``stall``) goes on at most, and how
long a send may block on a client that stopped reading: the server never outlives a test by
more."""


class MisbehavingServer:
    """Serves files under ``root`` (HEAD and GET, with ranges), except that a path may be set
    to misbehave: a status such as ``500`` (a server error) or ``410`` (an empty answer with
    that status), ``loop`` (redirects to itself), ``truncate`` (closes the connection halfway
    through the body it announced), ``long-length`` (announces more bytes than it sends, then
    closes), ``stall`` (answers nothing), and the liars of the hostile catalogue (issue 52):
    ``huge-body`` (a ranged GET answered whole, 200, with a body of ``HUGE_BYTES``: the file,
    then zeros), ``huge-range`` (206 with the asked Content-Range but a body of
    ``HUGE_BYTES``), ``short-length`` (announces, in HEAD and GET, 100 bytes fewer than it
    sends), ``trickle`` (a byte of the body every 0.2 s), ``slow-headers`` (a header line
    every 0.2 s), ``huge-headers`` (1 MiB of headers), ``redirect-away`` (redirects to the
    same path on ``localhost``, another host, which serves the file). Every slow answer ends within
    ``LIAR_SECONDS``. ``requests`` counts the requests each path received."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modes: dict[str, str] = {}
        self.requests: Counter[str] = Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, *, body: bool) -> None:
                path = self.path.split("?")[0]
                outer.requests[path.lstrip("/")] += 1
                mode = outer.modes.get(path.lstrip("/"), "ok")
                file = outer.root / path.lstrip("/")
                self.connection.settimeout(LIAR_SECONDS)  # a client that stopped reading
                if mode == "stall":
                    time.sleep(LIAR_SECONDS)
                    return
                if mode in ("slow-headers", "huge-headers"):
                    self._bad_headers(mode)
                    return
                if mode == "redirect-away" and not self.headers.get("Host", "").startswith(
                        "localhost"):
                    port = outer._server.server_address[1]
                    self.send_response(302)
                    self.send_header("Location", f"http://localhost:{port}{path}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mode.isdigit():
                    self._empty(int(mode))
                    return
                if mode == "loop":
                    self.send_response(302)
                    self.send_header("Location", path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if not file.is_file():
                    self._empty(404)
                    return
                data = file.read_bytes()
                status, start, stop = 200, 0, len(data)
                wanted = self.headers.get("Range")
                if wanted and wanted.startswith("bytes=") and mode != "huge-body":
                    first, _, last = wanted[6:].partition("-")
                    start = int(first)
                    stop = min(len(data), int(last) + 1) if last else len(data)
                    status = 206
                piece = data[start:stop]
                self.send_response(status)
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
                announced = len(piece) + {"long-length": 1000, "short-length": -100}.get(
                    mode, 0)
                if mode in ("huge-body", "huge-range") and body:
                    announced = HUGE_BYTES
                self.send_header("Content-Length", str(announced))
                self.send_header("Last-Modified", self.date_time_string(file.stat().st_mtime))
                self.end_headers()
                if not body:
                    return
                if mode in ("huge-body", "huge-range", "trickle"):
                    self._send_slowly(piece, announced, mode)
                    return
                if mode == "truncate":
                    piece = piece[: len(piece) // 2]
                self.wfile.write(piece)
                if mode in ("truncate", "long-length"):
                    self.wfile.flush()
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)

            def _send_slowly(self, piece: bytes, announced: int, mode: str) -> None:
                """``piece`` then zeros up to ``announced`` bytes, in blocks of 1 MiB (a
                byte every 0.2 s: ``trickle``), until the client goes away."""
                ends = time.monotonic() + LIAR_SECONDS
                block = 1 if mode == "trickle" else 1 << 20
                body = memoryview(piece + bytes(block))
                sent = 0
                with contextlib.suppress(OSError):
                    while sent < announced and time.monotonic() < ends:
                        count = min(block, announced - sent)
                        start = min(sent, len(piece))
                        self.wfile.write(body[start:start + count])
                        self.wfile.flush()
                        sent += count
                        if mode == "trickle":
                            time.sleep(0.2)
                self.close_connection = True

            def _bad_headers(self, mode: str) -> None:
                """A status line, then headers that never end (a line every 0.2 s) or 1 MiB
                of them."""
                ends = time.monotonic() + LIAR_SECONDS
                with contextlib.suppress(OSError):
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n")
                    if mode == "huge-headers":
                        line = b"X-Filler: " + b"x" * 1000 + b"\r\n"
                        self.wfile.write(line * 1024 + b"\r\n" + b"0123456789")
                    while mode == "slow-headers" and time.monotonic() < ends:
                        self.wfile.write(b"X-Slow: 1\r\n")
                        self.wfile.flush()
                        time.sleep(0.2)
                self.close_connection = True

            def _empty(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> MisbehavingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
