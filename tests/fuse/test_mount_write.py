"""Real FUSE mounts, write side: every operation lands in the store, or nothing does."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

import zarrfuse
from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

CRC_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}]
HEADER_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": 8}, {"key_suffix": ""}]}}]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def encoded_chunk(value: np.ndarray) -> bytes:
    """The stored bytes of a chunk of the raw uint8 + crc32c array: data then checksum."""
    store = zarr.storage.MemoryStore()
    a = zarr.create_array(store, shape=value.shape, chunks=value.shape, dtype=value.dtype,
                          serializer=BytesCodec(), compressors=[Crc32cCodec()])
    a[...] = value
    return zarr.core.sync.sync(store.get("c/" + "/".join("0" * value.ndim),
                                         zarr.core.buffer.default_buffer_prototype())).to_bytes()


@pytest.fixture
def crc_array(tmp_path) -> Path:
    """8x8 uint8 in 4x4 chunks, stored as data + 4-byte crc32c parts; chunk (1, 1) unwritten."""
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u1", fill_value=0,
                              serializer=BytesCodec(), compressors=[Crc32cCodec()],
                              storage_transformers=CRC_PARTS)
    data = np.arange(64, dtype="u1").reshape(8, 8)
    data[4:, 4:] = 0
    a[:] = data
    return path


def test_overwrite_create_unlink_through_the_mount(crc_array, tmp_path):
    new_value = np.full((4, 4), 7, dtype="u1")
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        # Overwrite (O_TRUNC) an existing chunk with valid bytes.
        (leaf / "001").write_bytes(encoded_chunk(new_value))
        assert (crc_array / "c/0/1.crc32c").read_bytes() == encoded_chunk(new_value)[-4:]
        # Create a chunk in the empty region.
        (mnt / "c/0/001/0/001").write_bytes(encoded_chunk(new_value + 1))
        # Unlink removes every part.
        os.unlink(mnt / "c/0/001/0/000")
        assert not (crc_array / "c/1/0").exists() and not (crc_array / "c/1/0.crc32c").exists()
        assert sorted(os.listdir(mnt / "c/0/001/0")) == ["001"]
        after = zarrfuse.open_array(crc_array)[:]
    np.testing.assert_array_equal(after[0:4, 4:8], new_value)
    np.testing.assert_array_equal(after[4:8, 4:8], new_value + 1)
    np.testing.assert_array_equal(after[4:8, 0:4], 0)  # fill value


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


def test_short_value_is_refused_at_close_and_old_chunk_kept(tmp_path):
    path = tmp_path / "arr"
    a = zarrfuse.create_array(path, shape=(64,), chunks=(64,), dtype="u1",
                              serializer=BytesCodec(), compressors=None,
                              storage_transformers=HEADER_PARTS)
    a[:] = 5
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt") as mnt:
        fd = os.open(mnt / "c/0/000", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"short")  # 5 bytes < the 8-byte header part
        with pytest.raises(OSError) as caught:
            os.close(fd)
        assert caught.value.errno == errno.EIO
        assert (mnt / "c/0/000").read_bytes() == bytes([5] * 64)
    assert snapshot(path) == before


def test_size_limit_is_efbig(crc_array, tmp_path):
    before = snapshot(crc_array)
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        # Default limit: twice the decoded chunk (16 bytes) + fixed parts + 1 MiB slack.
        fd = os.open(mnt / "c/0/000/0/000", os.O_RDWR)
        try:
            with pytest.raises(OSError) as caught:
                os.pwrite(fd, b"x", 2 << 20)
            assert caught.value.errno == errno.EFBIG
            with pytest.raises(OSError) as caught:
                os.ftruncate(fd, 2 << 20)
            assert caught.value.errno == errno.EFBIG
        finally:
            os.close(fd)
    assert snapshot(crc_array) == before


def test_a_bad_crc32c_is_refused_by_default(crc_array, tmp_path):
    before = snapshot(crc_array)
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        chunk = mnt / "c/0/000/0/000"
        good = chunk.read_bytes()
        with pytest.raises(OSError) as caught:
            chunk.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # checksum mismatch
        assert caught.value.errno == errno.EIO
        assert snapshot(crc_array) == before
        chunk.write_bytes(encoded_chunk(np.full((4, 4), 9, dtype="u1")))  # valid: stored
    np.testing.assert_array_equal(zarrfuse.open_array(crc_array)[0:4, 0:4], 9)


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
        # wins (closed by hand, in order: a with-block would close f2 first).
        target = mnt / "c/0/000/0/000"
        f1, f2 = open(target, "r+b"), open(target, "r+b")  # noqa: SIM115  (see above)
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


def test_new_chunk_is_listed_while_open_and_after_close(crc_array, tmp_path):
    """A created chunk shows in its directory before its first commit (tools stat and list
    what they just created), and stays once committed."""
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/001/0"
        assert sorted(os.listdir(leaf)) == ["000"]
        with open(leaf / "001", "wb") as f:
            assert sorted(os.listdir(leaf)) == ["000", "001"]
            f.write(encoded_chunk(np.full((4, 4), 3, dtype="u1")))
        assert sorted(os.listdir(leaf)) == ["000", "001"]
        assert sorted(os.listdir(mnt / "c/0/000/0")) == ["000", "001"]  # other leaves unchanged


def test_scratch_file_reopened_with_o_trunc_is_emptied(crc_array, tmp_path):
    """``echo a > .x.tmp; echo b > .x.tmp``: the second open truncates, it is no EIO."""
    with mounted(crc_array, tmp_path / "mnt") as mnt:
        scratch = mnt / "c/0/000/0/.x.tmp"
        scratch.write_bytes(b"first, longer contents")
        scratch.write_bytes(b"second")  # O_WRONLY | O_CREAT | O_TRUNC on an existing file
        assert scratch.read_bytes() == b"second"
        assert scratch.stat().st_size == 6
        scratch.unlink()
