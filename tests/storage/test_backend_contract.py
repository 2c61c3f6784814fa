"""One contract every backend keeps (issue 30, point 4), run against each the way zarr's
``StoreTests`` runs against each store: a local directory, a zip file, a web server (nginx),
S3 (moto), Azure (Azurite), and the disk-cached S3 backend of ``--cache-dir``.

Each backend is built as a mount builds it (``open_store_path`` then ``backend_for``) over
the same objects: a read contract for all, listings where the backend can list, and a write
contract where it can write.
"""

from __future__ import annotations

import os
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.azurite import AZURITE, azurite
from tests.http_servers import nginx
from tests.s3server import server_with_bucket
from zarrfuse.api.arrays import open_store_path
from zarrfuse.storage import backend_for, cache_identity
from zarrfuse.storage.base import Backend
from zarrfuse.storage.cached_backend import CachingBackend
from zarrfuse.storage.disk_cache import DiskCache
from zarrfuse.zarr_compat import sync

OBJECTS = {
    "a/zarr.json": b'{"zarr_format": 3, "node_type": "group"}',
    "a/c/0/0": bytes(range(256)) * 40,
    "a/c/0/1": b"short",
    "a/c/1/0": b"",
    "a/c/10/0": os.urandom(3000),
}
"""Keys and bytes every backend starts with (``a`` is a subdirectory of the test's root)."""


@dataclass
class Subject:
    backend: Backend
    writable: bool


def _seed_directory(root: Path) -> None:
    for key, data in OBJECTS.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with server_with_bucket("contract") as server:
        yield server.url


@pytest.fixture(scope="module")
def blob(tmp_path_factory) -> Iterator[str]:
    if not Path(AZURITE).exists():
        pytest.skip("Azurite is not installed (scripts/dev setup installs it)")
    with azurite(tmp_path_factory.mktemp("azurite")) as emulator:
        emulator.create_container("contract")
        yield emulator.connection_string


def _remote(url: str, options: dict[str, str]) -> Backend:
    store_path = sync(open_store_path(url, mode="a", storage_options=options))
    backend = backend_for(store_path.store, path=store_path.path, write_time=30.0)  # as mounted
    prefix = store_path.path
    for key, data in OBJECTS.items():
        backend.write(f"{prefix}/{key}", [memoryview(data)])
    return _Prefixed(backend, prefix)


class _Prefixed:
    """A backend whose keys are under ``prefix`` (a URL's path in its bucket), seen from it."""

    def __init__(self, inner: Backend, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix.strip("/")
        self.can_list = inner.can_list

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)
        if name in ("list_stats", "list_names", "list_subdirs", "stat", "read_all",
                    "read_document", "write", "delete"):
            return lambda key, *a, **k: method(f"{self.prefix}/{key}".strip("/"), *a, **k)
        if name == "open_reader":
            return lambda keys, *a, **k: method([f"{self.prefix}/{key}" for key in keys],
                                                *a, **k)
        return method


@pytest.fixture(params=["local", "zip", "http", "s3", "azure", "cached-s3"])
def subject(request, tmp_path) -> Iterator[Subject]:
    kind = request.param
    run = uuid.uuid4().hex[:8]
    if kind == "local":
        _seed_directory(tmp_path / "store")
        yield Subject(backend_for(sync(open_store_path(tmp_path / "store")).store), True)
    elif kind == "zip":
        with zipfile.ZipFile(tmp_path / "store.zip", "w") as archive:
            for key, data in OBJECTS.items():
                archive.writestr(key, data)
        yield Subject(backend_for(sync(open_store_path(tmp_path / "store.zip")).store), False)
    elif kind == "http":
        _seed_directory(tmp_path / "www")
        with nginx(tmp_path / "www", tmp_path / "nginx") as url:
            yield Subject(backend_for(sync(open_store_path(url)).store), False)
    elif kind in ("s3", "cached-s3"):
        url = request.getfixturevalue("s3")
        backend = _remote(f"s3://contract/{run}", {"endpoint_url": url})
        if kind == "cached-s3":
            store = sync(open_store_path(f"s3://contract/{run}",
                                         storage_options={"endpoint_url": url})).store
            backend = _Prefixed(CachingBackend(
                backend.inner, DiskCache(str(tmp_path / "cache"), 64 << 20),
                cache_identity(store) or "s3"), backend.prefix)
        yield Subject(backend, True)
    else:
        connection = request.getfixturevalue("blob")
        yield Subject(_remote(f"az://contract/{run}", {"connection_string": connection}), True)


def _read(backend: Backend, key: str, start: int, stop: int) -> bytes:
    reader = backend.open_reader([key])
    try:
        out = bytearray(stop - start)
        reader.read_into(0, start, memoryview(out))
        return bytes(out)
    finally:
        reader.close()


def test_objects_read_whole_and_in_ranges(subject):
    backend = subject.backend
    for key, data in OBJECTS.items():
        assert backend.read_all(key) == data, key
        found = backend.stat(key)
        assert found is not None and found.size == len(data), key
        if len(data) > 10:
            assert _read(backend, key, 3, len(data) - 2) == data[3:-2], key
    document = backend.read_document("a/zarr.json")
    assert document is not None and document.data == OBJECTS["a/zarr.json"]
    assert document.mtime_ns >= 0


def test_what_is_not_there_is_none(subject):
    backend = subject.backend
    assert backend.stat("a/c/9/9") is None
    assert backend.read_all("a/c/9/9") is None
    assert backend.read_document("a/nothing.json") is None


def test_listings_show_one_level(subject):
    backend = subject.backend
    if not backend.can_list:
        pytest.skip("this backend learns nothing by listing (a web server)")
    assert backend.list_names("a/c/0") == {"0", "1"}
    assert sorted(backend.list_subdirs("a/c")) == ["0", "1", "10"]
    stats = backend.list_stats("a/c/0")
    assert {name: s.size for name, s in stats.items()} == {"0": 10240, "1": 5}
    assert backend.list_names("a/none") == set()


def test_writes_replace_and_deletes_remove(subject):
    backend = subject.backend
    if not subject.writable:
        pytest.skip("read-only source")
    mtime = backend.write("a/c/0/1", [memoryview(b"new "), memoryview(b"value")])
    assert isinstance(mtime, int) and mtime > 0
    assert backend.read_all("a/c/0/1") == b"new value"
    assert backend.stat("a/c/0/1").size == 9  # type: ignore[union-attr]
    backend.write("a/c/5/5", [memoryview(b"made")])
    assert backend.read_all("a/c/5/5") == b"made"
    backend.delete("a/c/5/5")
    assert backend.stat("a/c/5/5") is None and backend.read_all("a/c/5/5") is None
    backend.delete("a/c/5/5")  # again: nothing to remove is no error
    if backend.can_list:
        assert "5" not in backend.list_subdirs("a/c") or backend.list_names("a/c/5") == set()
