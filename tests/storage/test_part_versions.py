"""The rule that keeps a read of a chunk's parts to one stored version (issue 52, point 1),
in process against moto: parts of different commits are asked again until they agree, a
part replaced after the reader pinned it is EIO (never the new bytes beside the old), a part
whose size disagrees with the chunk's opened size is EIO, and a journal commit names every
part it writes with one commit id.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator

import obstore
import pytest
from obstore.store import S3Store

from tests.s3server import S3Server, server_with_bucket
from zarrfuse.storage.object_gets import COMMIT_ATTRIBUTE
from zarrfuse.storage.objects import ObjectBackend

BUCKET = "part-versions"
DATA, CRC = "c/0", "c/0.crc32c"


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as s3:
        yield s3


def _store(server: S3Server, prefix: str) -> S3Store:
    return S3Store(BUCKET, prefix=prefix, endpoint=server.url, access_key_id="testing",
                   secret_access_key="testing", region="us-east-1",
                   client_options={"allow_http": True})


def _put(store: S3Store, key: str, data: bytes, commit: str | None) -> None:
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
    store = _store(server, "landing")
    backend = ObjectBackend(store, write_time=30.0)
    _put(store, DATA, b"new-data", "tx-new")
    _put(store, CRC, b"oldc", "tx-old")  # the commit's second copy has not landed yet
    server.reset()
    result: list[bytes | BaseException] = []

    def read() -> None:
        try:
            result.append(_read(backend, (8, 4)))
        except BaseException as e:  # noqa: BLE001  (handed to the test thread)
            result.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 20
    while server.per_key[("GET", f"{BUCKET}/landing/{CRC}")] < 2:  # asked again, at least once
        assert time.monotonic() < deadline and not result, result
        time.sleep(0.01)
    _put(store, CRC, b"newc", "tx-new")  # the copy lands
    reader.join(30)
    assert result == [b"new-data" + b"newc"]


def test_parts_that_never_agree_are_eio_not_served(server):
    store = _store(server, "torn")
    backend = ObjectBackend(store, write_time=0.3)  # the settle bound follows --store-timeout
    _put(store, DATA, b"new-data", "tx-new")
    _put(store, CRC, b"oldc", None)  # zarr-python wrote this one: no commit, not the same
    with pytest.raises(OSError) as caught:
        _read(backend, (8, 4))
    assert caught.value.errno == errno.EIO and "different commits" in str(caught.value)


def test_a_part_replaced_after_it_was_pinned_is_eio(server):
    store = _store(server, "pinned")
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
    store = _store(server, "resized")
    backend = ObjectBackend(store, write_time=30.0)
    _put(store, DATA, b"longer-data", "tx-2")
    _put(store, CRC, b"crc2", "tx-2")
    with pytest.raises(OSError) as caught:
        _read(backend, (8, 4))  # the sizes a listing gave before the commit
    assert caught.value.errno == errno.EIO and "when listed" in str(caught.value)


def test_a_journal_commit_names_every_part_with_one_commit(server):
    store = _store(server, "tagged")
    backend = ObjectBackend(store, write_time=30.0)
    backend.write_parts([(DATA, [memoryview(b"data")]), (CRC, [memoryview(b"crc!")])])
    commits = {obstore.get(store, key).attributes.get(COMMIT_ATTRIBUTE) for key in (DATA, CRC)}
    assert len(commits) == 1 and None not in commits
    backend.write_parts([(DATA, [memoryview(b"atad")]), (CRC, [memoryview(b"!crc")])])
    again = {obstore.get(store, key).attributes.get(COMMIT_ATTRIBUTE) for key in (DATA, CRC)}
    assert len(again) == 1 and again != commits
    assert _read(backend, (4, 4)) == b"atad!crc"
