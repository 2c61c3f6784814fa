"""A TCP proxy on loopback that can be made to stall: while stalled it accepts connections
and holds every byte in both directions (a server that hangs without closing anything, as a
stuck S3 endpoint or a black-holed route does); ``resume()`` lets everything through again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["StallProxy"]


class StallProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._flowing = threading.Event()
        self._flowing.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def connections(self) -> int:
        """Client connections accepted so far."""
        return len(self._sockets) // 2

    def __enter__(self) -> StallProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._flowing.set()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
