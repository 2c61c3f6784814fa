"""Multi-part commits on S3 are crash-atomic (issue 21, point 4): a daemon killed at any step
of a commit leaves, after the next writable mount's recovery, every chunk old or new.

Against a real S3 server (moto on loopback). The crash is a fault injected before the n-th
request that changes the store, for every n a commit makes: what the store holds then is
what a daemon killed at that moment leaves.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import boto3
import pytest

import zarrfuse
from tests.mounting import daemon_pid, force_unmount, mounted
from tests.s3server import S3Server, server_with_bucket
from zarrfuse.storage import object_journal
from zarrfuse.storage.base import Stat
from zarrfuse.storage.object_journal import JOURNAL_DIR, ObjectJournal
from zarrfuse.storage.objects import ObjectBackend

BUCKET = "journal"
OLD = {"c/0/0.head": b"old-head", "c/0/0": b"old-body" * 100, "c/0/0.crc": b"old-crc"}
NEW = {"c/0/0.head": b"new-head", "c/0/0": b"new-body" * 300, "c/0/0.crc": b"new-crc"}


class Crash(Exception):
    """The daemon dies here."""


class CrashBefore:
    """An object store that dies before its ``n``-th change (PUT, copy or DELETE)."""

    def __init__(self, backend: ObjectBackend, n: int) -> None:
        self.backend, self.left = backend, n
        self.requests = backend.requests

    def _change(self) -> None:
        if self.left == 0:
            raise Crash
        self.left -= 1

    def write(
        self,
        key: str,
        pieces: Sequence[memoryview],
        *,
        durable: bool = False,
        deadline: float | None = None,
        commit: str | None = None,
    ) -> int:
        self._change()
        return self.backend.write(key, pieces, durable=durable, deadline=deadline,
                                  commit=commit)

    async def copy_async(self, source: str, key: str) -> None:
        self._change()
        await self.backend.copy_async(source, key)

    async def delete_many_async(self, keys: Sequence[str]) -> None:
        self._change()
        await self.backend.delete_many_async(keys)

    async def read_all_async(self, key: str) -> bytes | None:
        return await self.backend.read_all_async(key)

    def read_all(self, key: str) -> bytes | None:
        return self.backend.read_all(key)

    def list_names(self, prefix: str) -> set[str]:
        return self.backend.list_names(prefix)

    def list_subdirs(self, prefix: str) -> list[str]:
        return self.backend.list_subdirs(prefix)

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        return self.backend.list_stats(prefix)

    def list_dir(self, prefix: str) -> tuple[dict[str, Stat], list[str]]:
        return self.backend.list_dir(prefix)


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as s3:
        yield s3


def _backend(server: S3Server, prefix: str | None, journal_path: str = "") -> ObjectBackend:
    return ObjectBackend(server.store(BUCKET, prefix), journal_path=journal_path)


def _keys(server: S3Server, prefix: str) -> dict[str, bytes]:
    s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/").get("Contents", [])
    return {
        o["Key"].removeprefix(f"{prefix}/"):
        s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in found
    }


def _commit(journal: ObjectJournal) -> None:
    journal.commit([(key, [memoryview(data)]) for key, data in NEW.items()])


def test_a_commit_replaces_every_part_and_leaves_no_record(server):
    backend = _backend(server, "whole")
    for key, data in OLD.items():
        backend.write(key, [memoryview(data)])
    backend.write_parts([(key, [memoryview(data)]) for key, data in NEW.items()])
    assert _keys(server, "whole") == NEW


CHANGES = len(NEW) + 1 + len(NEW) + 1
"""A commit's changes: the temps, the commit record, the copies, and one bulk deletion."""


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted", r"commit\(s\) unfinished")
@pytest.mark.parametrize("n", range(CHANGES + 1))
def test_a_crash_before_any_change_leaves_every_part_old_or_new_after_recovery(server, n):
    prefix = f"crash{n}"
    backend = _backend(server, prefix)
    for key, data in OLD.items():
        backend.write(key, [memoryview(data)])
    dying = ObjectJournal(CrashBefore(backend, n), "dying")
    if n < CHANGES:
        with pytest.raises(Crash):
            _commit(dying)
    else:
        _commit(dying)
    # The next mount comes after the stale age: an uncommitted transaction is a dead one's.
    forward, back = ObjectJournal(_backend(server, prefix), "next mount",
                                  stale_after=0).recover()
    after = _keys(server, prefix)
    assert after in (OLD, NEW), f"torn after a crash before change {n}: {after}"
    # Past the commit record (change 4 of 8) the commit is finished, never undone.
    committed = n > len(NEW)
    assert after == (NEW if committed else OLD)
    assert not any(k.startswith(JOURNAL_DIR) or k.endswith(".partial") for k in after)
    assert (forward, back) in ((0, 0), (1, 0), (0, 1))


ROWS, WIDTH = 4, 1 << 20
PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".head", "size": 16}, {"key_suffix": ""}]}}]


@pytest.mark.fuse
@pytest.mark.timeout(240)
def test_kill_9_of_an_s3_mount_under_parallel_writers_leaves_every_chunk_old_or_new(
    server, tmp_path
):
    """The real thing: ``cp`` writers on a mount of S3, the daemon killed with SIGKILL, then a
    writable mount recovers; every chunk's head and body come from one commit."""
    url, option = f"s3://{BUCKET}/killed", ["--storage-option", f"endpoint_url={server.url}"]
    zarrfuse.create_array(url, shape=(ROWS, WIDTH), chunks=(1, WIDTH), dtype="u1",
                          compressors=None, fill_value=255, storage_transformers=PARTS,
                          storage_options={"endpoint_url": server.url})[...] = 0
    values = {v: tmp_path / f"v{v}" for v in range(1, 12)}
    for v, path in values.items():
        path.write_bytes(bytes([v]) * WIDTH)
    allowed = {bytes([v]) * WIDTH for v in (0, *values)}
    rng = random.Random(21)
    mnt = tmp_path / "mnt"
    for _ in range(4):
        with mounted(url, mnt, "--layout", "source", *option) as live:
            pid = daemon_pid(live)
            writers = [
                subprocess.Popen(
                    ["sh", "-c", 'while :; do for f in "$@"; do cp "$f" "$0" || exit 0; done; done',
                     str(live / "c" / str(row) / "0"),
                     *map(str, rng.sample(list(values.values()), 4))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for row in range(ROWS)
            ]
            time.sleep(rng.uniform(0.5, 1.5))  # the workload: writers copy a while, then the crash
            os.kill(pid, signal.SIGKILL)
            for w in writers:
                try:
                    w.wait(20)
                except subprocess.TimeoutExpired:
                    w.kill()
            force_unmount(live)
    with mounted(url, mnt, "--layout", "source", *option):  # recovers
        pass
    stored = _keys(server, "killed")
    torn = {}
    for row in range(ROWS):
        value = stored[f"c/{row}/0.head"] + stored[f"c/{row}/0"]
        if value not in allowed:
            torn[row] = sorted(set(value))[:4]
    assert not torn, f"chunks neither old nor new after kill -9: {torn}"
    # Committed transactions are finished; uncommitted ones (which change no chunk) wait
    # for the stale age, as another live mount's would.
    assert not [k for k in stored if k.endswith(".commit") or k.endswith(".partial")]


def _stored_as(server: S3Server, prefix: str, values: dict[str, bytes]) -> ObjectBackend:
    backend = _backend(server, prefix)
    for key, data in values.items():
        backend.write(key, [memoryview(data)])
    return backend


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted", r"commit\(s\) unfinished")
def test_another_mounts_uncommitted_transaction_is_left_until_it_is_stale(server, monkeypatch):
    """Issue 34 point 6: recovery must not undo a live mount's commit in progress (it would
    tear its chunk); an uncommitted transaction changes no key, so leaving it is harmless."""
    backend = _stored_as(server, "young", OLD)
    live = ObjectJournal(CrashBefore(backend, len(NEW)), "live mount")
    with pytest.raises(Crash):  # every temp stored, no record yet: still being made
        _commit(live)
    assert ObjectJournal(_backend(server, "young"), "second mount").recover() == (0, 0)
    kept = _keys(server, "young")
    assert {k: v for k, v in kept.items() if not k.startswith(JOURNAL_DIR)} == OLD
    assert len([k for k in kept if k.startswith(JOURNAL_DIR)]) == len(NEW)
    # Later: the journal's wall clock, moved on by the test, finds the temps 2 s old.
    monkeypatch.setattr(object_journal, "time", SimpleNamespace(
        time_ns=lambda: time.time_ns() + 2 * 10**9, monotonic=time.monotonic))
    assert ObjectJournal(_backend(server, "young"), "later mount",
                         stale_after=1).recover() == (0, 1)
    assert _keys(server, "young") == OLD


class RecoveredMeanwhile(CrashBefore):
    """A live owner whose first copy comes after another mount's recovery finished its
    committed transaction."""

    def __init__(self, backend: ObjectBackend, other: ObjectJournal) -> None:
        super().__init__(backend, 10**6)
        self.other = other

    async def copy_async(self, source: str, key: str) -> None:
        if self.other is not None:
            other, self.other = self.other, None
            assert await asyncio.to_thread(other.recover) == (1, 0)
        await super().copy_async(source, key)


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted", r"commit\(s\) unfinished")
def test_a_commit_finished_by_another_mounts_recovery_succeeds_for_its_owner(server):
    """The owner's copy finds its temp gone and its record gone: the commit was finished for
    it, so its close reports success, and the store holds exactly the new chunk."""
    backend = _stored_as(server, "raced", OLD)
    owner = ObjectJournal(RecoveredMeanwhile(backend, ObjectJournal(
        _backend(server, "raced"), "second mount")), "owner")
    _commit(owner)
    assert _keys(server, "raced") == NEW


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted", r"commit\(s\) unfinished")
def test_a_read_only_mount_reads_an_interrupted_commit_finished_and_changes_nothing(server):
    """Issue 34 point 3 on S3: the record is stored and one part copied; a read-only backend
    shows every part new (sizes from listings too), and the store is left as it was."""
    backend = _stored_as(server, "shown", OLD)
    with pytest.raises(Crash):  # after the temps, the record and one copy
        _commit(ObjectJournal(CrashBefore(backend, len(NEW) + 2), "dying"))
    before = _keys(server, "shown")
    reader = _backend(server, "shown")
    assert reader.show_recovered() == 1
    for key, data in NEW.items():
        assert bytes(reader.read_range(key, 0, len(data))) == data
        assert reader.read_all(key) == data
        assert reader.stat(key).size == len(data)
    assert {n: st.size for n, st in reader.list_stats("c/0").items()} == {
        k.rpartition("/")[2]: len(v) for k, v in NEW.items()}
    assert _keys(server, "shown") == before


def test_verify_repair_finishes_an_interrupted_commit_without_a_mount(server):
    """``zarrfuse verify --repair`` does what the next writable mount would, then verifies."""
    url = f"s3://{BUCKET}/repair"
    array = zarrfuse.create_array(url, shape=(1, 64), chunks=(1, 64), dtype="u1",
                                  compressors=None, storage_transformers=PARTS,
                                  storage_options={"endpoint_url": server.url})
    array[...] = 1
    new = bytes([7]) * 64
    # As a mount of the URL does it: keys from the bucket's root, the journal beside the array.
    dying = ObjectJournal(CrashBefore(_backend(server, None), 2 + 1 + 1), "dying", "repair")
    with pytest.raises(Crash):  # killed after the commit record and the first copy
        dying.commit([("repair/c/0/0.head", [memoryview(new[:16])]),
                      ("repair/c/0/0", [memoryview(new[16:])])])
    result = subprocess.run(
        [sys.executable, "-m", "zarrfuse", "verify", "--repair", url,
         "--storage-option", f"endpoint_url={server.url}"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "interrupted commits: 1 finished, 0 undone" in result.stdout
    assert "1 chunks of 1 array: 0 failed" in result.stdout
    stored = _keys(server, "repair")
    assert stored["c/0/0.head"] + stored["c/0/0"] == new
    assert not [k for k in stored if JOURNAL_DIR in k or k.endswith(".partial")]


class SlowCopies(CrashBefore):
    """An object store whose server-side copies wait for ``go`` (or fail while ``broken``)."""

    def __init__(self, backend: ObjectBackend) -> None:
        super().__init__(backend, -1)
        self.go = threading.Event()
        self.broken = False

    async def copy_async(self, source: str, key: str) -> None:
        if self.broken:
            raise OSError(errno.EIO, "COPY: the store is failing")
        await asyncio.to_thread(self.go.wait, 30)
        await self.backend.copy_async(source, key)


def _slow(server: S3Server, prefix: str) -> tuple[ObjectBackend, SlowCopies]:
    backend = ObjectBackend(server.store(BUCKET, prefix), write_time=1.0)
    slow = SlowCopies(backend)
    backend._journal._objects = slow  # the store behind the journal only
    for key, data in OLD.items():
        backend.write(key, [memoryview(data)])
    return backend, slow


def _read(backend: ObjectBackend, key: str) -> bytes:
    size = backend.stat(key).size
    return bytes(backend.read_range(key, 0, size))


def test_a_committed_transaction_whose_copies_stall_is_answered_in_time_and_read_new(server):
    """Issue 34 point 5: once the record is stored the commit has happened; copies the store
    makes slowly go on in the background, the answer comes by the deadline (success, the
    truth), and meanwhile every part reads new (from its temp)."""
    backend, slow = _slow(server, "slowcopy")
    with ThreadPoolExecutor(1) as pool:  # answered while the copies are held (30 s), or fails
        pool.submit(backend.write_parts, [(key, [memoryview(data)]) for key, data in NEW.items()]
                    ).result(timeout=1.0 + 5)
    assert {key: _read(backend, key) for key in NEW} == NEW
    assert _keys(server, "slowcopy")["c/0/0"] == OLD["c/0/0"]  # not copied yet
    # the copies go on as a task of the mount's store client, not a thread of their own
    assert not [t.name for t in threading.enumerate() if t.name.startswith("zarrfuse-commit")]
    slow.go.set()
    backend._journal.finishing.settle(NEW, deadline=time.monotonic() + 10)
    assert _keys(server, "slowcopy") == NEW
    assert backend._journal.finishing.shown("c/0/0") is None


@pytest.mark.expect_log(r"is stored, but finishing it failed")
def test_a_committed_transaction_whose_copies_fail_is_not_answered_eio(server):
    """A copy that fails after the record is not an EIO (recovery would make the chunk new
    all the same): the parts read new, and the next write of them finishes it first."""
    backend, slow = _slow(server, "failcopy")
    slow.broken = True
    backend.write_parts([(key, [memoryview(data)]) for key, data in NEW.items()])
    assert {key: _read(backend, key) for key in NEW} == NEW
    slow.broken = False
    slow.go.set()
    newer = {key: data + b"!" for key, data in NEW.items()}
    backend.write_parts([(key, [memoryview(data)]) for key, data in newer.items()])
    assert _keys(server, "failcopy") == newer  # the old copies did not land after these
