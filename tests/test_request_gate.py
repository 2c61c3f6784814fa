"""Every request to a remote store goes through the mount's store client (issue 52, point 5):
no module but the gate imports an HTTP client or obstore.

Read from the source with ``ast`` (every import, including the ones inside functions). The
gate is ``storage/store_requests.py`` (the client: its loop, bound, timeout, background
tasks, and the one HTTP client, for signed URLs) and ``storage/object_gets.py`` (the obstore
calls, each a coroutine the client runs). Building a store is not a request: ``api/s3.py``
and ``api/cloud.py`` build obstore's store objects from the user's URL and options (no
request is made then), so they may import ``obstore.store`` (the classes) but not
``obstore`` itself (its request functions); ``api/s3.py`` may import botocore to find AWS
credentials for the store's signer (a credential lookup, not a request to the store).
zarr's own store classes (``ObjectStore``, ``FsspecStore``) are named by the storage layer
to tell which backend serves a store; a mount's requests through them take the client's
slots (``StoreBackend``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "zarrfuse"

CLIENTS = (
    "obstore", "urllib.request", "urllib3", "http.client", "requests", "aiohttp", "httpx",
    "pycurl", "botocore", "boto3", "aiobotocore", "s3fs", "gcsfs", "adlfs", "fsspec",
)
"""Modules that send requests over the network (an import of a submodule counts)."""

GATE = {"storage/store_requests.py": {"urllib.request"}, "storage/object_gets.py": {"obstore"}}
BUILDERS = {"api/s3.py": {"obstore.store", "botocore"}, "api/cloud.py": {"obstore.store"}}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _client(name: str) -> str | None:
    """The network client ``name`` is, or is part of; None if it is none."""
    for client in CLIENTS:
        if name == client or name.startswith(f"{client}."):
            return client
    return None


def _allowed(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(f"{a}.") for a in allowed)


def test_only_the_gate_imports_a_network_client_or_obstore():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        allowed = GATE.get(where) or BUILDERS.get(where) or set()
        for name in sorted(_imports(path)):
            if _client(name) is not None and not _allowed(name, allowed):
                found.append(f"{where}: {name}")
    # a builder's bare "from obstore.store import X" names "obstore.store" and "obstore.store.X"
    assert not found, "imports past the store client (store_requests):\n" + "\n".join(found)


def test_the_gate_is_where_the_test_says():
    """The allowances name real modules that still import what they are allowed."""
    for where, allowed in {**GATE, **BUILDERS}.items():
        names = _imports(PACKAGE / where)
        for client in allowed:
            assert any(_allowed(n, {client}) for n in names), (where, client)
