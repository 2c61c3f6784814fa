"""Real FUSE mounts, write side: every operation lands in the store, or nothing does. What
needs the kernel or a tool stays here (file offsets and O_APPEND, links and FIFOs, concurrent
processes, rsync/cp/dd/mv); the commit rules are tested in process:
``tests/filesystem/test_inprocess_commits.py``."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec

import zarrfuse
from tests.arrays import HEADER_PARTS, make_crc_array, snapshot
from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

@pytest.fixture
def crc_array(tmp_path) -> Path:
    return make_crc_array(tmp_path / "arr")


def test_write_at_offset_append_truncate_fsync(tmp_path):
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(64,), chunks=(64,), dtype="u1", fill_value=0,
                              serializer=BytesCodec(), compressors=None,
                              storage_transformers=HEADER_PARTS)
    a[:] = np.arange(64, dtype="u1")
    # About file semantics: the 66- and 32-byte values are no valid chunks, so no checks.
    with mounted(path, tmp_path / "mnt", "--no-verify") as mnt:
        chunk = mnt / "c/0/000"
        original = chunk.read_bytes()
        assert original == bytes(range(64))
        with open(chunk, "r+b") as f:  # no O_TRUNC: write in the middle
            f.seek(10)
            f.write(b"\xff\xfe")
            f.flush()
            os.fsync(f.fileno())  # commits now
            assert (path / "c/0").read_bytes()[2:4] == b"\xff\xfe"  # 8-byte header part first
        with open(chunk, "ab") as f:  # append
            f.write(b"\x01\x02")
        assert (path / "c/0").read_bytes()[-2:] == b"\x01\x02"
        assert chunk.stat().st_size == 66
        os.truncate(chunk, 64)  # truncate(2) on the path
        assert (path / "c/0").stat().st_size == 56 and (path / "c/0.header").stat().st_size == 8
        with open(chunk, "r+b") as f:
            f.truncate(32)  # ftruncate, committed at close
        assert chunk.stat().st_size == 32
        assert chunk.read_bytes() == original[:10] + b"\xff\xfe" + original[12:32]
    assert (path / "c/0.header").read_bytes() + (path / "c/0").read_bytes() == (
        original[:10] + b"\xff\xfe" + original[12:32])


def test_refused_names_and_operations_store_nothing(crc_array, tmp_path):
    before = snapshot(crc_array)
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        refused = {
            "outside the grid": lambda: (leaf / "002").write_bytes(b"x" * 20),
            "not a chunk name": lambda: (leaf / "notes.txt").write_bytes(b"x"),
            "non-canonical": lambda: (leaf / "01").write_bytes(b"x"),
            "symlink": lambda: os.symlink("000", leaf / "link"),
            "hard link": lambda: os.link(leaf / "000", leaf / "also"),
            "special file": lambda: os.mkfifo(leaf / "fifo"),
            "rename chunk onto chunk": lambda: os.rename(leaf / "000", leaf / "001"),
            "rename a chunk away": lambda: os.rename(leaf / "000", leaf / ".backup~"),
            "write zarr.json": lambda: (mnt / "zarr.json").write_text("{}"),
            "remove a grid directory": lambda: os.rmdir(mnt / "c/0/001/0"),
            "new directory": lambda: os.mkdir(mnt / "c/0/005"),
        }
        for what, attempt in refused.items():
            with pytest.raises(OSError) as caught:
                attempt()
            assert caught.value.errno in (errno.EPERM, errno.EINVAL, errno.EACCES), what
        with pytest.raises(FileExistsError):
            os.mkdir(mnt / "c/0/001")
    assert snapshot(crc_array) == before


def test_readers_see_old_or_new_never_a_mix(tmp_path):
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(1 << 20,), chunks=(1 << 20,), dtype="u1",
                              serializer=BytesCodec(), compressors=None,
                              storage_transformers=HEADER_PARTS)
    a[:] = 1
    with mounted(path, tmp_path / "mnt") as mnt:
        chunk = mnt / "c/0/000"
        with open(chunk, "rb") as reader:
            first = reader.read(4096)
            chunk.write_bytes(b"\x02" * (1 << 20))  # committed at close
            rest = reader.read()
        assert set(first + rest) == {1}  # the reader keeps the version it opened
        assert set(chunk.read_bytes()) == {2}  # after close() every new reader sees the new
        assert chunk.stat().st_size == 1 << 20
    assert set((path / "c/0").read_bytes()) == {2}


def test_parallel_writers_and_last_commit_wins(tmp_path):
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(16, 1 << 16), chunks=(1, 1 << 16), dtype="u1",
                      compressors=None, fill_value=0)
    with mounted(path, tmp_path / "mnt") as mnt:
        def write(i: int) -> None:
            (mnt / f"c/0/{i:03d}/0/000").write_bytes(bytes([i]) * (1 << 16))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # Two handles on one chunk: each commits its own complete buffer, so the last to close
        # wins (closed by hand, in order: a with-block would close f2 first). The first is
        # write-only: a read-write one alone would hold the pages and refuse the second.
        target = mnt / "c/0/000/0/000"
        f1, f2 = open(target, "wb"), open(target, "r+b")  # noqa: SIM115  (see above)
        f1.write(b"\xaa" * (1 << 16))
        f2.write(b"\xbb" * (1 << 16))
        f1.close()
        f2.close()
        assert target.read_bytes() == b"\xbb" * (1 << 16)
    data = zarr.open_array(path)[:]
    for i in range(1, 16):
        assert (data[i] == i).all()
    assert (data[0] == 0xBB).all()


def test_rsync_cp_dd_truncate_rm_mv(tmp_path):
    path = tmp_path / "arr"
    zarr.create_array(path, shape=(3, 3000), chunks=(1, 1000), dtype="u1",
                      compressors=None, fill_value=0)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for i in range(3):
        (incoming / f"{i:03d}").write_bytes(bytes([i + 1]) * 1000)
    with mounted(path, tmp_path / "mnt") as mnt:
        row = [mnt / f"c/0/{r:03d}/0" for r in range(3)]
        # rsync -a: temp files (.000.XXXXXX) renamed onto chunk names, modes and times set.
        run_with_timeout(["rsync", "-a", f"{incoming}/", f"{row[0]}/"], 60)
        run_with_timeout(["rsync", "-a", f"{incoming}/", f"{row[0]}/"], 60)  # again: no-op
        run_with_timeout(["cp", str(incoming / "000"), str(row[1] / "000")], 30)
        run_with_timeout(["dd", f"if={incoming / '002'}", f"of={row[1] / '000'}", "bs=5",
                          "count=2", "seek=1", "conv=notrunc", "status=none"], 30)
        (row[2] / "000.tmp").write_bytes(bytes([9]) * 1000)
        run_with_timeout(["mv", str(row[2] / "000.tmp"), str(row[2] / "000")], 30)
        run_with_timeout(["truncate", "-s", "1000", str(row[2] / "001")], 30)  # creates
        run_with_timeout(["rm", str(row[0] / "002")], 30)
        assert sorted(os.listdir(row[0])) == ["000", "001"]
        assert sorted(os.listdir(row[2])) == ["000", "001"]
    data = zarr.open_array(path)[:]
    assert (data[0, :1000] == 1).all() and (data[0, 1000:2000] == 2).all()
    assert (data[0, 2000:] == 0).all()  # removed: fill value
    assert data[1, :5].tolist() == [1] * 5 and data[1, 5:15].tolist() == [3] * 10
    assert (data[1, 15:1000] == 1).all()
    assert (data[2, :1000] == 9).all() and (data[2, 1000:2000] == 0).all()
    assert (path / "c/2/1").stat().st_size == 1000  # truncate stored a chunk of zeros
    assert not [p for p in path.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def test_read_only_mount_refuses_every_write(crc_array, tmp_path):
    before = snapshot(crc_array)
    with mounted(crc_array, tmp_path / "mnt", "--read-only") as mnt:
        leaf = mnt / "c/0/000/0"
        for attempt in [
            lambda: (leaf / "000").write_bytes(b"x"),
            lambda: open(leaf / "000", "r+b"),  # noqa: SIM115  (must fail: EROFS, nothing to close)
            lambda: os.unlink(leaf / "000"),
            lambda: os.truncate(leaf / "000", 1),
            lambda: (leaf / ".tmp").write_bytes(b"x"),
            lambda: os.mkdir(mnt / "c/0/new"),
        ]:
            with pytest.raises(OSError) as caught:
                attempt()
            assert caught.value.errno == errno.EROFS
    assert snapshot(crc_array) == before
