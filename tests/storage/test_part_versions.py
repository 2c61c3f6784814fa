"""The rule that keeps a read of a chunk's parts to one stored version (issue 52, point 1),
in process against moto's S3 and Azurite (each test runs on both): parts of different
commits are asked again until they agree, a part replaced after the reader pinned it is EIO
(never the new bytes beside the old), a part whose size disagrees with the chunk's opened
size is EIO, and a journal commit names every part it writes with one commit id. On a web
server (nginx) only the pin applies: a chunk replaced while a reader has it open is EIO.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import obstore
import pytest
from obstore.store import AzureStore

from tests.azurite import ACCOUNT, AZURITE, azurite
from tests.http_servers import nginx
from tests.s3server import server_with_bucket
from zarrfuse.api.cloud import azure_config, open_cloud
from zarrfuse.storage import backend_for
from zarrfuse.storage.object_gets import COMMIT_ATTRIBUTE
from zarrfuse.storage.objects import ObjectBackend

BUCKET = "part-versions"
DATA, CRC = "c/0", "c/0.crc32c"


@dataclass(frozen=True)
class Server:
    """What a test needs of a store server: a store under a prefix of its bucket or
    container, and how many GETs of a key (``prefix/key``) it has answered."""

    store: Callable[[str], Any]
    gets: Callable[[str], int]


@pytest.fixture(scope="module", params=["s3", "azure"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Server]:
    if request.param == "s3":
        with server_with_bucket(BUCKET) as s3:
            yield Server(
                lambda prefix: s3.store(BUCKET, prefix),
                lambda path: s3.per_key[("GET", f"{BUCKET}/{path}")])
        return
    if not Path(AZURITE).exists():
        pytest.skip("Azurite is not installed (scripts/dev setup installs it)")
    with azurite(tmp_path_factory.mktemp("azurite"), debug=True) as emulator:
        emulator.create_container(BUCKET)
        config = azure_config({"connection_string": emulator.connection_string})
        yield Server(
            lambda prefix: AzureStore(BUCKET, prefix=prefix, **config),
            lambda path: emulator.requests().count(("GET", f"{ACCOUNT}/{BUCKET}/{path}")))


def _put(store: Any, key: str, data: bytes, commit: str | None) -> None:
    attributes = None if commit is None else {COMMIT_ATTRIBUTE: commit}
    obstore.put(store, key, data, attributes=attributes, use_multipart=False)


def _read(backend: ObjectBackend, sizes: tuple[int, int]) -> bytes:
    reader = backend.open_reader([DATA, CRC], list(sizes))
    try:
        out = bytearray(sum(sizes))
        reader.read_into(0, 0, memoryview(out)[: sizes[0]])
        reader.read_into(1, 0, memoryview(out)[sizes[0]:])
        return bytes(out)
    finally:
        reader.close()


def test_parts_of_two_commits_are_asked_again_until_they_agree(server):
    store = server.store("landing")
    backend = ObjectBackend(store, write_time=30.0)
    _put(store, DATA, b"new-data", "tx-new")
    _put(store, CRC, b"oldc", "tx-old")  # the commit's second copy has not landed yet
    asked = server.gets(f"landing/{CRC}")
    result: list[bytes | BaseException] = []

    def read() -> None:
        try:
            result.append(_read(backend, (8, 4)))
        except BaseException as e:  # noqa: BLE001  (handed to the test thread)
            result.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 20
    while server.gets(f"landing/{CRC}") < asked + 2:  # asked again, at least once
        assert time.monotonic() < deadline and not result, result
        time.sleep(0.01)
    _put(store, CRC, b"newc", "tx-new")  # the copy lands
    reader.join(30)
    assert result == [b"new-data" + b"newc"]


def test_parts_that_never_agree_are_eio_not_served(server):
    store = server.store("torn")
    backend = ObjectBackend(store, write_time=0.3)  # the settle bound follows --store-timeout
    _put(store, DATA, b"new-data", "tx-new")
    _put(store, CRC, b"oldc", None)  # zarr-python wrote this one: no commit, not the same
    with pytest.raises(OSError) as caught:
        _read(backend, (8, 4))
    assert caught.value.errno == errno.EIO and "different commits" in str(caught.value)


def test_a_part_replaced_after_it_was_pinned_is_eio(server):
    store = server.store("pinned")
    backend = ObjectBackend(store, write_time=30.0)
    big = bytes(range(256)) * 1024  # larger than the first GET of a part not being read
    _put(store, DATA, big, "tx-1")
    _put(store, CRC, b"crc1", "tx-1")
    reader = backend.open_reader([DATA, CRC], [len(big), 4])
    try:
        head = bytearray(4)
        reader.read_into(1, 0, memoryview(head))  # pins both parts: the data's first bytes
        assert bytes(head) == b"crc1"
        _put(store, DATA, big[::-1], "tx-2")  # another commit replaces the data part
        _put(store, CRC, b"crc2", "tx-2")
        rest = bytearray(len(big) - (64 << 10))
        with pytest.raises(OSError) as caught:
            reader.read_into(0, 64 << 10, memoryview(rest))
        assert caught.value.errno == errno.EIO and "replaced" in str(caught.value)
    finally:
        reader.close()
    assert _read(backend, (len(big), 4)) == big[::-1] + b"crc2"  # a new open: the new one


def test_a_part_of_another_size_than_opened_is_eio(server):
    store = server.store("resized")
    backend = ObjectBackend(store, write_time=30.0)
    _put(store, DATA, b"longer-data", "tx-2")
    _put(store, CRC, b"crc2", "tx-2")
    with pytest.raises(OSError) as caught:
        _read(backend, (8, 4))  # the sizes a listing gave before the commit
    assert caught.value.errno == errno.EIO and "when listed" in str(caught.value)


def test_a_journal_commit_names_every_part_with_one_commit(server):
    store = server.store("tagged")
    backend = ObjectBackend(store, write_time=30.0)
    backend.write_parts([(DATA, [memoryview(b"data")]), (CRC, [memoryview(b"crc!")])])
    commits = {obstore.get(store, key).attributes.get(COMMIT_ATTRIBUTE) for key in (DATA, CRC)}
    assert len(commits) == 1 and None not in commits
    backend.write_parts([(DATA, [memoryview(b"atad")]), (CRC, [memoryview(b"!crc")])])
    again = {obstore.get(store, key).attributes.get(COMMIT_ATTRIBUTE) for key in (DATA, CRC)}
    assert len(again) == 1 and again != commits
    assert _read(backend, (4, 4)) == b"atad!crc"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, Path]]:
    """nginx serving a directory: (its root, its URL, its access log)."""
    root, run = tmp_path_factory.mktemp("www"), tmp_path_factory.mktemp("nginx")
    with nginx(root, run) as url:
        yield root, url, run / "access.log"


def test_a_chunk_replaced_on_a_web_server_while_open_is_eio(web):
    root, url, access_log = web
    big = bytes(range(256)) * 4096  # 1 MiB: a read far from the first is a GET of its own
    (root / "c").mkdir()
    (root / "c" / "0").write_bytes(big)
    backend = backend_for(open_cloud(url, read_only=True, storage_options=None).store,
                          write_time=30.0)
    reader = backend.open_reader(["c/0"], [len(big)])
    try:
        head = bytearray(4096)
        reader.read_into(0, 0, memoryview(head))  # pins the chunk: the ETag of its first GET
        assert bytes(head) == big[:4096]
        # Replaced whole, as a publisher's rename does; nginx's ETag is the file's mtime in
        # seconds and its size, so the new file of the same size is given a later mtime.
        (root / "c" / "new").write_bytes(big[::-1])
        mtime = os.stat(root / "c" / "0").st_mtime
        os.utime(root / "c" / "new", (mtime + 10, mtime + 10))
        os.replace(root / "c" / "new", root / "c" / "0")
        rest = bytearray(len(big) // 2)
        with pytest.raises(OSError) as caught:
            reader.read_into(0, len(big) // 2, memoryview(rest))
        assert caught.value.errno == errno.EIO and "replaced" in str(caught.value)
    finally:
        reader.close()
    deadline = time.monotonic() + 20
    while not (refused := [line for line in access_log.read_text().splitlines()
                           if '"GET /c/0 ' in line and '" 412 ' in line]):
        assert time.monotonic() < deadline, "nginx never logged a refused GET"
        time.sleep(0.01)  # nginx logs a request after its answer is sent
    assert len(refused) == 1 and f'"bytes={len(big) // 2}-' in refused[0], refused
    again = backend.open_reader(["c/0"], [len(big)])
    try:
        out = bytearray(len(big))
        again.read_into(0, 0, memoryview(out))
        assert bytes(out) == big[::-1]  # a new open: the new chunk
    finally:
        again.close()
