"""Backends: LocalBackend's part writes land every byte, in order, whatever the pieces look
like; every backend tells each object's time along with its size."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import FsspecStore, ZipStore

from zarrfuse.errors import UnfitDocument
from zarrfuse.limits import MAX_DOCUMENT_BYTES
from zarrfuse.storage.base import Stat
from zarrfuse.storage.file_writes import WRITE_STEP
from zarrfuse.storage.local import LocalBackend
from zarrfuse.storage.local_files import read_to_end
from zarrfuse.storage.stores import StoreBackend

piece_sizes = st.sampled_from([0, 1, 7, 4096, WRITE_STEP - 1, WRITE_STEP, WRITE_STEP + 3, 3 << 20])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(piece_sizes, max_size=8))
def test_write_stores_the_pieces_joined(tmp_path_factory, sizes):
    root = tmp_path_factory.mktemp("store")
    pieces = [os.urandom(n) for n in sizes]
    LocalBackend(root).write("c/0/1", [memoryview(p) for p in pieces])
    assert (root / "c/0/1").read_bytes() == b"".join(pieces)
    assert [p.name for p in (root / "c/0").iterdir()] == ["1"]  # no temp file left behind


def test_write_of_more_pieces_than_one_writev_takes(tmp_path: Path):
    pieces = [os.urandom(3) for _ in range(3 * os.sysconf("SC_IOV_MAX") + 5)]
    LocalBackend(tmp_path).write("k", [memoryview(p) for p in pieces])
    assert (tmp_path / "k").read_bytes() == b"".join(pieces)


def test_local_write_returns_the_stored_time_and_listings_carry_it(tmp_path: Path):
    backend = LocalBackend(tmp_path)
    written = backend.write("c/0", [memoryview(b"abc")])
    assert written == os.stat(tmp_path / "c/0").st_mtime_ns
    assert backend.list_stats("c") == {"0": Stat(3, written)} and backend.stat("c/0") == Stat(
        3, written)
    assert backend.set_mtime("c/0", 10**18) and backend.stat("c/0") == Stat(3, 10**18)


def test_other_stores_give_their_own_times_or_a_stable_one(tmp_path: Path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d/k").write_bytes(b"xy")
    os.utime(tmp_path / "d/k", ns=(1, 1_500_000_000_000_000_000))
    fsspec_store = FsspecStore.from_url(f"file://{tmp_path}")
    assert StoreBackend(fsspec_store).list_stats("d") == {"k": Stat(2, 1_500_000_000_000_000_000)}
    with ZipStore(tmp_path / "a.zip", mode="w") as zipped:
        sync(zipped.set("d/k", default_buffer_prototype().buffer.from_bytes(b"xyz")))
    zip_time = os.stat(tmp_path / "a.zip").st_mtime_ns
    backend = StoreBackend(sync(ZipStore.open(tmp_path / "a.zip", mode="r")))
    assert backend.stat("d/k") == Stat(3, zip_time) and not backend.set_mtime("d/k", 5)


# --- a local store is not trusted: paths resolve beneath its root ----------------------------


@pytest.mark.expect_log(r"resolves outside the store root")
def test_local_backend_follows_links_inside_and_refuses_links_out(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "c").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    (store / "c" / "0").write_bytes(b"data")
    os.symlink("0", store / "c" / "1")  # relative, in
    os.symlink(store / "c" / "0", store / "c" / "2")  # absolute, in
    os.symlink("../../outside/secret", store / "c" / "3")  # relative, out
    os.symlink(outside / "secret", store / "c" / "4")  # absolute, out
    os.symlink(outside, store / "d")  # a directory, out
    backend = LocalBackend(store)
    assert sorted(backend.list_names("c")) == ["0", "1", "2"]
    assert sorted(backend.list_stats("c")) == ["0", "1", "2"]
    assert backend.list_subdirs("") == ["c"]
    for key in ("c/1", "c/2"):
        assert backend.read_all(key) == b"data" and backend.stat(key).size == 4
    for key in ("c/3", "c/4", "d/secret", "c/../../outside/secret"):
        assert backend.stat(key) is None and backend.read_all(key) is None
    with pytest.raises(PermissionError):
        backend.write("d/new", [memoryview(b"x")])
    backend.delete("d/secret")
    assert (outside / "secret").read_bytes() == b"secret" and not (outside / "new").exists()


@pytest.mark.expect_log(r"refused: it resolves outside the store root")
def test_stats_of_many_names_agree_with_a_stat_of_each(tmp_path):
    """``stat_names`` (one directory descriptor, a stat per name in it) answers what ``stat``
    of each key does: links in followed, links out, directories and absent names None, a
    FIFO present (never opened), names through a link out refused."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "c" / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    (store / "c" / "0").write_bytes(b"data")
    os.symlink("0", store / "c" / "1")
    os.symlink(store / "c" / "0", store / "c" / "2")
    os.symlink("../../outside/secret", store / "c" / "3")
    os.symlink(outside / "secret", store / "c" / "4")
    os.mkfifo(store / "c" / "5")
    (store / "c" / "sub" / "7").write_bytes(b"x")
    os.symlink(outside, store / "out")
    backend = LocalBackend(store)
    names = ["0", "1", "2", "3", "4", "5", "6", "sub", "sub/7", "..", ""]
    each = [backend.stat(f"c/{n}") for n in names]
    assert backend.stat_names("c", names) == each
    assert [s is not None for s in each] == [True] * 3 + [False, False, True] + [False] * 2 + [
        True, False, False]
    assert each[0] == Stat(4, os.stat(store / "c" / "0").st_mtime_ns) and each[1] == each[0]
    assert backend.stat_names("out", ["secret"]) == [None]  # the directory leads out
    assert backend.stat_names("absent", ["0", "1"]) == [None, None]


@pytest.mark.expect_log(r"resolves outside the store root")
@pytest.mark.parametrize("shares", [1, 2, 3, 4])
def test_shares_of_a_listing_are_apart_and_together_the_listing(tmp_path, shares):
    """``list_stats_share`` (threads listing one big directory together): every name the
    listing gives is in exactly one share, with the same stat; links in followed, links
    out, subdirectories and a loop left out as the listing leaves them."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "c" / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    for i in range(200):
        (store / "c" / str(i)).write_bytes(b"x" * (i % 7))
    os.symlink("0", store / "c" / "link")
    os.symlink(outside / "secret", store / "c" / "out")
    os.mkfifo(store / "c" / "fifo")
    backend = LocalBackend(store)
    listing = backend.list_stats("c")
    assert len(listing) == 202 and "link" in listing and "fifo" in listing
    parts = [backend.capabilities.list_stats_share("c", i, shares) for i in range(shares)]
    assert sum(len(p) for p in parts) == len(listing)
    assert {k: v for p in parts for k, v in p.items()} == listing
    if shares > 1:
        assert all(parts)  # 202 names: no share is empty


@pytest.mark.expect_log(r"not a regular file \(FIFO\)")
def test_local_backend_never_opens_special_files(tmp_path):
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / "0")
    backend = LocalBackend(tmp_path)
    # Present (never silently absent, which reads as the fill value), and never opened.
    assert backend.stat("c/0") is not None and backend.list_names("c") == {"0"}
    assert set(backend.list_stats("c")) == {"0"}
    with pytest.raises(OSError) as raised:  # would block forever if opened
        backend.open_reader(["c/0"])
    assert raised.value.errno == errno.EIO and "FIFO" in str(raised.value)


@pytest.mark.expect_log(r"\(a loop\): not shown")
def test_local_backend_hides_a_directory_symlink_that_loops(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "up").symlink_to("../..")  # to the store root: a loop
    (tmp_path / "a" / "b" / "self").symlink_to(".")
    (tmp_path / "other").mkdir()
    (tmp_path / "a" / "side").symlink_to("../other")  # a plain link elsewhere: shown
    backend = LocalBackend(tmp_path)
    assert backend.list_subdirs("a/b") == []
    assert sorted(backend.list_subdirs("a")) == ["b", "side"]


@pytest.mark.parametrize("hint", [0, 10, 4096, (1 << 20) + 7])
def test_a_whole_read_goes_to_the_files_real_end_whatever_its_stat_said(tmp_path, hint):
    """A file that grew or shrank between its fstat and its read is read to its real end:
    never cut at the size the stat gave, never padded."""
    data = os.urandom((1 << 20) + 7)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert read_to_end(fd, hint, len(data)) == data
        os.lseek(fd, 0, os.SEEK_SET)
        assert read_to_end(fd, hint, len(data) - 1) is None  # one byte over the limit
        assert read_to_end(fd, len(data) + 1, len(data)) is None  # over it when opened
    finally:
        os.close(fd)


@pytest.mark.expect_log(r"not a regular file \(FIFO\)")
def test_metadata_documents_are_bounded_and_never_special(tmp_path):
    (tmp_path / "zarr.json").write_bytes(b"{}")
    os.truncate(tmp_path / "zarr.json", MAX_DOCUMENT_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(UnfitDocument, match="over the"):
        LocalBackend(tmp_path).read_document("zarr.json")
    (tmp_path / "zarr.json").unlink()
    os.mkfifo(tmp_path / "zarr.json")
    with pytest.raises(UnfitDocument, match="FIFO"):  # never opened: it would block
        LocalBackend(tmp_path).read_document("zarr.json")
    with pytest.raises(OSError) as raised:  # a reader of bytes gets an I/O error
        LocalBackend(tmp_path).read_all("zarr.json")
    assert raised.value.errno == errno.EIO


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted")
def test_a_read_only_backend_reads_an_interrupted_commit_as_recovery_will_leave_it(tmp_path):
    """Issue 34 point 3: a crash left a two-part commit half renamed (its commit record
    written); a read-only mount may not finish it, so it reads every part as ``recover``
    will leave it (new), changes nothing, and says in one line that a repair is due."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(b"old-main")
    (tmp_path / "c" / "0.tail").write_bytes(b"O")
    (tmp_path / "c" / "1").write_bytes(b"kept")
    journal = LocalBackend(tmp_path)._journal
    renames = [("c/0.tx.partial", "c/0"), ("c/0.tail.tx.partial", "c/0.tail"),
               ("c/1.ty.partial", "c/1")]
    journal._record("tx", "pending", renames[:2], False)
    journal._write_temp("c/0.tx.partial", [memoryview(b"new-main!")], False)
    journal._write_temp("c/0.tail.tx.partial", [memoryview(b"N")], False)
    journal._record("tx", "commit", renames[:2], False)
    os.replace(tmp_path / "c" / "0.tx.partial", tmp_path / "c" / "0")  # then the crash
    journal._record("ty", "pending", renames[2:], False)  # never committed: not shown
    journal._write_temp("c/1.ty.partial", [memoryview(b"never")], False)

    backend = LocalBackend(tmp_path)
    assert backend.show_recovered() == 2
    reader = backend.open_reader(["c/0", "c/0.tail", "c/1"])
    try:
        assert reader.sizes == (9, 1, 4)
        out = bytearray(1)
        reader.read_into(1, 0, memoryview(out))
        assert out == b"N"
    finally:
        reader.close()
    new_tail = tmp_path / "c" / "0.tail.tx.partial"
    assert backend.stat("c/0.tail") == Stat(1, new_tail.stat().st_mtime_ns)
    assert backend.list_stats("c")["0.tail"].size == 1
    assert (tmp_path / "c" / "0.tail").read_bytes() == b"O"  # nothing stored changed
    assert backend.recover() == (1, 1)  # what a writable mount then does
    assert (tmp_path / "c" / "0.tail").read_bytes() == b"N"


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted")
def test_a_mount_never_recovers_nor_removes_another_live_mounts_commit(tmp_path):
    """Issue 34 point 6: each mount keeps its commit records in a directory of its own,
    locked while its commit is under way; another mount's recovery (at its start) leaves
    them alone, and takes them over only once their mount is gone."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(b"old")
    first = LocalBackend(tmp_path)._journal
    first._held = first._locked_dir()  # first's commit under way: record and temp written
    first._record("tx", "pending", [("c/0.tx.partial", "c/0")], False)
    first._write_temp("c/0.tx.partial", [memoryview(b"new")], False)

    second = LocalBackend(tmp_path)
    assert second.recover() == (0, 0)  # alive: left alone
    assert (tmp_path / "c" / "0.tx.partial").read_bytes() == b"new"
    assert second.recover() == (0, 0)
    # a commit of the second mount meanwhile: its own directory, nothing of first's touched
    second.write_parts([("c/1", [memoryview(b"a")]), ("c/1.t", [memoryview(b"b")])])
    assert (tmp_path / "c" / "1").read_bytes() == b"a"
    assert (tmp_path / "c" / "0.tx.partial").exists()

    os.close(first._held)  # first's mount is gone (killed): its lock is free
    assert LocalBackend(tmp_path).recover() == (0, 1)  # no commit record: rolled back
    assert not (tmp_path / "c" / "0.tx.partial").exists()
    assert (tmp_path / "c" / "0").read_bytes() == b"old"
    assert not (tmp_path / ".zarrfuse-commits").exists()


@pytest.mark.expect_log(r"skipping bad: bad/zarr.json")
def test_an_unfit_document_is_said_once_by_the_node_that_leaves_it_out(tmp_path, caplog):
    """Issue 34: a FIFO ``zarr.json`` logged two lines (the backend's, then the group's);
    the docs promise one. The backend says nothing and raises; the catalog says why."""
    import numpy as np  # noqa: PLC0415
    import zarr  # noqa: PLC0415

    from tests.inprocess import in_process  # noqa: PLC0415

    zarr.create_group(tmp_path / "g")
    zarr.create_array(tmp_path / "g" / "ok", data=np.arange(4, dtype="u1"), chunks=(2,))
    (tmp_path / "g" / "bad").mkdir()
    os.mkfifo(tmp_path / "g" / "bad" / "zarr.json")
    with caplog.at_level("WARNING"):
        with pytest.raises(UnfitDocument):
            LocalBackend(tmp_path / "g").read_document("bad/zarr.json")
        assert caplog.records == []
        with in_process(str(tmp_path / "g"), read_only=True) as fs:
            assert sorted(fs.listdir("")) == ["ok", "zarr.json"]
    said = [r for r in caplog.records if "bad/zarr.json" in r.getMessage()]
    assert len(said) == 1 and "not a regular file (FIFO)" in said[0].getMessage(), said
