"""A remote write answered EIO never lands later (issue 34, point 5).

Against moto on loopback behind a proxy that can stall: while stalled it holds every byte,
as a stuck endpoint or a black-holed route does, and lets them through on ``resume()``. A
PUT held that way reaches the server after its writer gave up. The test server checks a
presigned URL's expiry as S3 does (moto itself does not), so the held PUT is refused there.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import obstore
import pytest
from obstore.store import AzureStore, S3Store

from tests.azurite import AZURITE, azurite
from tests.deadlines import answered
from tests.s3server import CREDENTIALS, S3Server, aws_environment
from tests.stall_proxy import StallProxy
from zarrfuse.api.cloud import azure_config
from zarrfuse.api.s3 import s3_client_config
from zarrfuse.storage.object_journal import JOURNAL_DIR, ObjectJournal
from zarrfuse.storage.objects import ObjectBackend

pytestmark = pytest.mark.timeout(120)

BUCKET = "signed"
BUDGET = 2.0


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with aws_environment(CREDENTIALS), S3Server() as server:
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1").create_bucket(
            Bucket=BUCKET)
        yield server


@pytest.fixture
def proxy(server: S3Server) -> Iterator[StallProxy]:
    with StallProxy(server.port) as stalling:
        yield stalling


def _store(url: str, prefix: str) -> S3Store:
    return S3Store(BUCKET, prefix=prefix, **s3_client_config({"endpoint_url": url}))


def _held(server: S3Server, key: str) -> bytes | None:
    client = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
    try:
        return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except client.exceptions.NoSuchKey:
        return None


def _settle(server: S3Server, kind: str, at_least: int, wait: float = 10.0,
            *others: str) -> int:
    """The server's count of ``kind`` (and ``others``) once it reached ``at_least`` (or
    ``wait`` ran out)."""
    def count() -> int:
        counts = server.snapshot()[0]
        return sum(counts[k] for k in (kind, *others))

    ends = time.monotonic() + wait
    while count() < at_least and time.monotonic() < ends:
        time.sleep(0.1)
    return count()


def test_a_write_is_stored_and_answered(server, proxy):
    backend = ObjectBackend(_store(proxy.url, "ok"), write_time=BUDGET)
    backend.write("c/0", [memoryview(b"new bytes")])
    assert _held(server, "ok/c/0") == b"new bytes"
    backend.write_parts([("c/1.a", [memoryview(b"a")]), ("c/1.b", [memoryview(b"b")])])
    assert (_held(server, "ok/c/1.a"), _held(server, "ok/c/1.b")) == (b"a", b"b")


def test_a_held_write_is_answered_eio_in_time_and_never_lands(server, proxy):
    backend = ObjectBackend(_store(proxy.url, "held"), write_time=BUDGET)
    backend.write("c/0", [memoryview(b"old")])
    server.reset()
    proxy.stall()
    # The write's time is the deadline handed to it (BUDGET): it is answered EIO once its
    # URL has expired, and the reason says so. The stall lasts until resumed, so a write
    # that did not keep its time would never answer: the hang guard, far above, fails it.
    with pytest.raises(OSError) as raised:
        answered(lambda: backend.write("c/0", [memoryview(b"new")]), "a held write")
    assert raised.value.errno == errno.EIO
    assert "will not take it" in str(raised.value)
    proxy.resume()  # the held PUT reaches the server now, past its URL's expiry
    assert _settle(server, "EXPIRED", 1) == 1
    assert server.snapshot()[0]["PUT"] == 0
    assert _held(server, "held/c/0") == b"old"


def test_without_a_signed_url_the_same_write_lands_after_the_answer(server, proxy):
    """The control: the bug the signed URL fixes. The client's own PUT, answered with a
    timeout, is stored once the proxy lets it through."""
    client_store = S3Store(BUCKET, prefix="control", **{
        **s3_client_config({"endpoint_url": proxy.url}),
        "client_options": {"allow_http": True, "timeout": "1s", "connect_timeout": "1s"},
        "retry_config": {"max_retries": 0, "retry_timeout": timedelta(seconds=1)},
    })
    obstore.put(client_store, "c/0", b"old")
    proxy.stall()
    with pytest.raises(Exception):  # noqa: B017  (obstore's timeout error)
        obstore.put(client_store, "c/0", b"new")
    proxy.resume()
    ends = time.monotonic() + 10
    while _held(server, "control/c/0") != b"new" and time.monotonic() < ends:
        time.sleep(0.1)
    assert _held(server, "control/c/0") == b"new"


def test_a_commit_whose_record_is_held_changes_no_chunk(server, proxy, expect_log):
    """A commit answered EIO while the store stalls changes no chunk, whatever reaches the
    store after the answer: its record is a signed PUT, refused once late, and without the
    record no temp is ever copied over its key. Its temps are plain PUTs (each names its
    commit in user metadata, which a signed URL would have to cover): one held past the
    commit's clean-up lands after it, an uncommitted transaction that recovery rolls back
    once stale, and that no read-only mount shows."""
    backend = ObjectBackend(_store(proxy.url, "journal"), write_time=BUDGET)
    parts = [("c/0.a", b"old-a"), ("c/0.b", b"old-b")]
    backend.write_parts([(k, [memoryview(v)]) for k, v in parts])
    server.reset()
    proxy.stall()
    with pytest.raises(OSError) as raised:
        backend.write_parts([("c/0.a", [memoryview(b"new-a")]), ("c/0.b", [memoryview(b"x")])])
    assert raised.value.errno == errno.EIO
    proxy.resume()
    # What the stall held reaches the store in either order: the temp's PUT and the
    # clean-up's bulk DELETE (a POST); a temp that lands after it is left, uncommitted.
    assert (_settle(server, "PUT", 1), _settle(server, "POST", 1)) == (1, 1)
    assert (_held(server, "journal/c/0.a"), _held(server, "journal/c/0.b")) == (
        b"old-a", b"old-b")
    client = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
    left = [o["Key"] for o in client.list_objects_v2(
        Bucket=BUCKET, Prefix=f"journal/{JOURNAL_DIR}/").get("Contents", [])]
    assert not [key for key in left if key.endswith(".commit")], left  # nothing rolls forward
    # Whether the late temp is still there depends on the order the two held requests were
    # applied in; either way it is a transaction without a record: counted, never shown.
    expect_log(r"1 commit\(s\) unfinished")
    late = ObjectBackend(_store(server.url, "journal"))
    assert late.show_recovered() in (0, 1)
    assert [late.read_all(key) for key, _ in parts] == [b"old-a", b"old-b"]
    # The client's own retries of a held temp's PUT may still land after the answer, and
    # after this recovery (a request that has left cannot be called back): each is one more
    # uncommitted transaction, a temp and never a record, which a later recovery rolls back.
    fresh = ObjectBackend(_store(server.url, "journal"))
    rolled_forward, _ = ObjectJournal(fresh, "next mount", "journal", stale_after=0).recover()
    assert rolled_forward == 0
    after = [o["Key"] for o in client.list_objects_v2(
        Bucket=BUCKET, Prefix=f"journal/{JOURNAL_DIR}/").get("Contents", [])]
    assert not [key for key in after if key.endswith(".commit")], after
    assert (_held(server, "journal/c/0.a"), _held(server, "journal/c/0.b")) == (
        b"old-a", b"old-b")


def test_a_refused_write_says_why_at_once(server):
    """Refused, not tried again until the write's 30 s run out: one PUT, and the store's
    reason in the answer."""
    backend = ObjectBackend(
        S3Store("no-such-bucket", **s3_client_config({"endpoint_url": server.url})),
        write_time=30.0,
    )
    server.reset()
    with pytest.raises(OSError) as raised:
        backend.write("c/0", [memoryview(b"x")])
    assert raised.value.errno == errno.EIO
    assert "NoSuchBucket" in str(raised.value)
    assert server.snapshot()[0]["PUT"] == 1


def test_on_azure_a_held_write_never_lands(tmp_path):
    """The same on Azure (Azurite checks a SAS's expiry, as Azure does)."""
    if not Path(AZURITE).exists():
        pytest.skip("Azurite is not installed (scripts/dev setup installs it)")
    with azurite(tmp_path, debug=True) as emulator:
        emulator.create_container("held")
        port = int(emulator.endpoint.split(":")[2].split("/")[0])
        with StallProxy(port) as proxy:
            through = emulator.connection_string.replace(f":{port}/", f":{proxy.port}/")
            store = AzureStore("held", **azure_config({"connection_string": through}))
            backend = ObjectBackend(store, write_time=BUDGET)
            backend.write("c/0", [memoryview(b"old")])
            proxy.stall()
            with pytest.raises(OSError) as raised:  # in its time, as on S3 (the guard: hangs)
                answered(lambda: backend.write("c/0", [memoryview(b"new")]), "a held write")
            assert raised.value.errno == errno.EIO
            assert "will not take it" in str(raised.value)
            proxy.resume()

            def puts() -> int:
                return sum(method == "PUT" and "/held/c/0?" in f"/{url}"
                           for method, url in emulator.requests())

            ends = time.monotonic() + 30  # the held PUT reaches the emulator, which refuses it
            while puts() < 2 and time.monotonic() < ends:
                time.sleep(0.1)
            assert puts() == 2, emulator.requests()
            assert bytes(obstore.get(store, "c/0").bytes()) == b"old"


def test_a_held_delete_is_answered_eio_and_never_takes_effect(server, proxy):
    backend = ObjectBackend(_store(proxy.url, "rm"), write_time=BUDGET)
    backend.write("c/0", [memoryview(b"kept")])
    server.reset()
    proxy.stall()
    with pytest.raises(OSError) as raised:
        backend.delete("c/0")
    assert raised.value.errno == errno.EIO
    proxy.resume()
    assert _settle(server, "EXPIRED", 1) == 1
    assert server.snapshot()[0]["DELETE"] == 0
    assert _held(server, "rm/c/0") == b"kept"
    backend.delete("c/0")
    backend.delete("c/0")  # absent: no error
    assert _held(server, "rm/c/0") is None
