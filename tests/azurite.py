"""Azurite (Microsoft's Azure Storage emulator, from npm) on loopback for the ``az://`` tests.

``scripts/dev setup`` installs it under ``.npm-tools``. The fixture starts ``azurite-blob`` on
a free port with its data in the test's directory and kills it in teardown; containers are
created with one REST call signed with the emulator's well-known account key (SharedKey).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

from tests.http_servers import _wait_listening, free_port

__all__ = ["ACCOUNT", "AZURITE", "KEY", "Azurite", "azurite"]

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's documented development account and key (public, like moto's test keys)."""

AZURITE = str(Path(__file__).resolve().parents[1] / ".npm-tools/node_modules/.bin/azurite-blob")
VERSION = "2021-08-06"
_MARKERS = itertools.count()


class Azurite:
    """A running emulator: its blob endpoint and a way to make containers."""

    def __init__(self, port: int, debug_log: Path | None = None) -> None:
        self.endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        self._debug_log = debug_log

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL path and query) of every request the emulator answered before this
        call. Azurite writes its debug log behind its answers (a loaded machine saw the last
        two GETs of a batch missing), so a marker request is sent and the log read once the
        marker is in it: the lines before it are complete."""
        assert self._debug_log is not None, "start it with azurite(..., debug=True)"
        marker = f"zarrfuse-log-marker-{next(_MARKERS)}"
        with contextlib.suppress(urllib.error.HTTPError):  # 4xx: unsigned, but logged
            urllib.request.urlopen(f"{self.endpoint}/{marker}", timeout=10).close()
        deadline = time.monotonic() + 30
        while True:
            out = []
            text = self._debug_log.read_text()
            for line in text[: text.rfind("\n") + 1].splitlines():  # a line being written: later
                if "RequestMethod=" in line:
                    method = line.split("RequestMethod=")[1].split()[0]
                    url = line.split("RequestURL=")[1].split()[0]
                    out.append((method, url.split("/", 3)[3]))
            if any(marker in url for _, url in out):
                return [(m, url) for m, url in out if "zarrfuse-log-marker-" not in url]
            assert time.monotonic() < deadline, "the emulator never logged the marker request"
            time.sleep(0.05)

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.endpoint};")

    def create_container(self, name: str) -> None:
        date = formatdate(usegmt=True)
        resource = f"/{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container"
        headers = f"x-ms-date:{date}\nx-ms-version:{VERSION}\n"
        # VERB, then 11 standard headers (only Content-Type set), then x-ms-*, the resource.
        to_sign = "PUT\n" + "\n" * 4 + "application/octet-stream\n" + "\n" * 6 + headers + resource
        signature = base64.b64encode(hmac.new(
            base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()).decode()
        request = urllib.request.Request(
            f"{self.endpoint}/{name}?restype=container", method="PUT", data=b"",
            headers={"x-ms-date": date, "x-ms-version": VERSION,
                     "Content-Type": "application/octet-stream",
                     "Authorization": f"SharedKey {ACCOUNT}:{signature}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 201, answer.status


@contextlib.contextmanager
def azurite(location: Path, *, debug: bool = False) -> Iterator[Azurite]:
    """Azurite on loopback, its data under ``location``; ``debug``: every request logged
    (``Azurite.requests``)."""
    port = free_port()
    log = location / "debug.log" if debug else None
    proc = subprocess.Popen(
        [AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
         str(location), "--skipApiVersionCheck", "--loose", "--silent",
         *(["--debug", str(log)] if log else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_listening(port, proc, 30)
        yield Azurite(port, log)
    finally:
        proc.kill()
        proc.wait(10)
