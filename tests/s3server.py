"""A loopback S3 server for tests and benchmarks: moto's S3, counting what clients ask.

moto serves S3 from memory in this process (a werkzeug server on 127.0.0.1, a free port).
A WSGI wrapper counts requests by kind (LIST, GET, HEAD, PUT, DELETE, POST) and per key,
and the bytes of object bodies sent, and refuses a presigned URL past its expiry as S3
does. ``stop()`` is a real outage: the listening socket is closed (new connections are
refused) and open keep-alive connections are cut, so clients see the errors a crashed
server gives; ``start()`` again serves the same data on the same port.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import boto3
import pytest
from moto.core.authorization import enable_iam_authentication
from moto.moto_server.threaded_moto_server import MotoRequestHandler
from moto.server import DomainDispatcherApplication, create_backend_app
from obstore.store import S3Store
from werkzeug.serving import BaseWSGIServer, make_server

__all__ = ["CREDENTIALS", "S3Server", "iam_user", "signatures_checked"]

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""Environment for clients of the server (moto accepts any credentials, unless
``signatures_checked``)."""

PIECE = 256 << 10  # bodies are sent (and counted) in pieces of this size


def request_kind(method: str, path: str, query: str) -> tuple[str, str]:
    """("LIST", bucket) / ("GET", "bucket/key") ... for a path-style S3 request."""
    key = urllib.parse.unquote(path.lstrip("/"))
    bucket_only = "/" not in key.rstrip("/")
    if method == "GET" and bucket_only:
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        if not ({"location", "versioning", "acl", "policy", "uploads"} & params.keys()):
            return "LIST", key.rstrip("/")
    return method, key


class S3Server:
    """moto's S3 on 127.0.0.1, counting requests; ``url`` is its endpoint."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.counts: Counter[str] = Counter()
        self.per_key: Counter[tuple[str, str]] = Counter()
        self.bytes_sent = 0
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._bodies_in_flight = 0
        self._handling = 0
        """Requests counted whose effect moto has not applied yet."""
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._app = DomainDispatcherApplication(create_backend_app)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def store(self, bucket: str, prefix: str | None = None) -> S3Store:
        """obstore's client of ``bucket`` (below ``prefix``) on this server, with the
        credentials moto accepts (``CREDENTIALS``)."""
        return S3Store(bucket, prefix=prefix, endpoint=self.url,
                       access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                       secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                       region=CREDENTIALS["AWS_DEFAULT_REGION"],
                       client_options={"allow_http": True})

    # --- counting ------------------------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.per_key.clear()
            self.bytes_sent = 0

    def snapshot(self, settle: float = 5.0) -> tuple[Counter[str], int]:
        """The request counts and body bytes sent so far.

        A client may hold a body's last piece before the server thread counts it, and a
        request is counted as it arrives, before moto applies it; waiting (up to ``settle``
        seconds) for both makes the count what was sent, and the store what they did.
        """
        with self._settled:
            self._settled.wait_for(lambda: self._bodies_in_flight == self._handling == 0,
                                   timeout=settle)
            return Counter(self.counts), self.bytes_sent

    def _counted(self, body: Iterable[bytes]) -> Iterator[bytes]:
        with self._lock:
            self._bodies_in_flight += 1
        try:
            for chunk in body:
                for at in range(0, len(chunk), PIECE):
                    piece = chunk[at : at + PIECE]
                    yield piece  # resumes once the piece was written to the socket
                    with self._lock:
                        self.bytes_sent += len(piece)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
            with self._settled:
                self._bodies_in_flight -= 1
                self._settled.notify_all()

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if _presigned_url_expired(environ.get("QUERY_STRING", "")):
            with self._lock:
                self.counts["EXPIRED"] += 1
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [_EXPIRED]
        kind, key = request_kind(
            environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/"),
            environ.get("QUERY_STRING", ""),
        )
        with self._lock:
            self.counts[kind] += 1
            self.per_key[kind, key] += 1
            self._handling += 1
        try:
            answer = self._app(environ, start_response)
        finally:
            with self._settled:
                self._handling -= 1
                self._settled.notify_all()
        return self._counted(answer)

    # --- serving -------------------------------------------------------------------------

    def start(self) -> S3Server:
        server = self

        class Handler(MotoRequestHandler):
            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._connections.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._connections.discard(self.connection)
                super().finish()

        self._server = make_server("127.0.0.1", self.port, self._wsgi, threaded=True,
                                   request_handler=Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """An outage: refuse new connections and cut the open ones."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(10)
        self._server = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_EXPIRED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Request has expired</Message></Error>"
)


def _presigned_url_expired(query: str) -> bool:
    """Whether a presigned URL's validity (``X-Amz-Date`` plus ``X-Amz-Expires`` seconds)
    ended before the request arrived: S3 refuses such a request with 403 "Request has
    expired"; moto does not check (a PUT held up past it would be stored)."""
    if "X-Amz-Expires" not in query:
        return False
    params = urllib.parse.parse_qs(query)
    try:
        signed = datetime.datetime.strptime(params["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ")
        expires = int(params["X-Amz-Expires"][0])
    except (KeyError, ValueError):
        return False
    ends = signed.replace(tzinfo=datetime.UTC).timestamp() + expires
    return time.time() > ends


def client_env() -> dict[str, str]:
    """This process's environment plus the server's credentials (for subprocesses)."""
    return {**os.environ, **CREDENTIALS}


def iam_user(server: S3Server, name: str) -> tuple[str, str]:
    """A new IAM user allowed everything on S3; its access key id and secret.

    Call it before ``signatures_checked`` (creating the user is itself an unsigned request).
    """
    iam = boto3.client("iam", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


@contextmanager
def signatures_checked() -> Iterator[None]:
    """While inside, moto checks every request's SigV4 signature against the IAM users'
    keys (an unknown key id, a wrong secret or a stray session token get 403), as AWS does.

    moto's switch is process-wide: it holds for every server in this process, and for
    requests mount daemons send them.
    """
    with enable_iam_authentication():
        yield


@contextmanager
def aws_environment(values: dict[str, str]) -> Iterator[None]:
    """The AWS variables ``values`` set, and none that would send a client elsewhere (a
    profile, an endpoint): what a test's S3 clients, and the daemons it starts, find."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in values.items():
            mp.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(name, raising=False)
        yield


@contextmanager
def server_with_bucket(bucket: str) -> Iterator[S3Server]:
    """A running server with ``bucket`` made, the test credentials in the environment (the
    daemons a test starts inherit them): what a module-scoped ``server`` fixture yields."""
    import boto3  # noqa: PLC0415  (the test extra's client; only S3 tests load it)

    with aws_environment(CREDENTIALS), S3Server() as server:
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=bucket)
        yield server
