"""Commits, in process: a written chunk lands in every one of its parts or in none, unlink
removes every part, and refused values keep the chunk. The same rules through the kernel and
real tools: ``tests/fuse/test_mount_write.py``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
from zarr.codecs import BytesCodec

import zarrfuse
from tests.arrays import HEADER_PARTS, encoded_chunk, make_crc_array, snapshot
from tests.inprocess import in_process, refused


@pytest.fixture
def crc_array(tmp_path) -> Path:
    return make_crc_array(tmp_path / "arr")


def test_overwrite_create_unlink(crc_array):
    new_value = np.full((4, 4), 7, dtype="u1")
    with in_process(str(crc_array)) as fs:
        fs.write("c/0/000/0/001", encoded_chunk(new_value))  # O_TRUNC over a stored chunk
        assert (crc_array / "c/0/1.crc32c").read_bytes() == encoded_chunk(new_value)[-4:]
        fs.write("c/0/001/0/001", encoded_chunk(new_value + 1))  # a chunk not stored
        fs.unlink("c/0/001/0/000")  # removes every part
        assert not (crc_array / "c/1/0").exists() and not (crc_array / "c/1/0.crc32c").exists()
        assert fs.listdir("c/0/001/0") == ["001"]
    after = zarrfuse.open_array(crc_array)[:]
    np.testing.assert_array_equal(after[0:4, 4:8], new_value)
    np.testing.assert_array_equal(after[4:8, 4:8], new_value + 1)
    np.testing.assert_array_equal(after[4:8, 0:4], 0)  # fill value


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_value_shorter_than_the_fixed_parts_is_refused_at_close(tmp_path):
    path = tmp_path / "arr"
    zarrfuse.create_array(path, shape=(64,), chunks=(64,), dtype="u1",
                          serializer=BytesCodec(), compressors=None,
                          storage_transformers=HEADER_PARTS)[:] = 5
    before = snapshot(path)
    with in_process(str(path)) as fs:
        handle = fs.open("c/0/000", os.O_WRONLY | os.O_TRUNC)
        fs.pwrite(handle, b"short", 0)  # 5 bytes < the 8-byte header part
        assert refused(lambda: fs.close(handle)) == errno.EIO
        assert fs.read("c/0/000") == bytes([5] * 64)
    assert snapshot(path) == before


@pytest.mark.expect_log(r"(write|setattr): chunk .* over the limit")
def test_the_size_limit_is_efbig(crc_array):
    before = snapshot(crc_array)
    with in_process(str(crc_array)) as fs:
        # Default limit: twice the decoded chunk (16 bytes) + fixed parts + 1 MiB slack.
        handle = fs.open("c/0/000/0/000", os.O_RDWR)
        try:
            assert refused(lambda: fs.pwrite(handle, b"x", 2 << 20)) == errno.EFBIG
            assert refused(lambda: fs.ftruncate(handle, 2 << 20)) == errno.EFBIG
        finally:
            fs.close(handle)
    assert snapshot(crc_array) == before


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_bad_crc32c_is_refused_by_default(crc_array):
    before = snapshot(crc_array)
    with in_process(str(crc_array)) as fs:
        good = fs.read("c/0/000/0/000")
        bad = good[:-1] + bytes([good[-1] ^ 1])  # checksum mismatch
        assert refused(lambda: fs.write("c/0/000/0/000", bad)) == errno.EIO
        assert snapshot(crc_array) == before
        fs.write("c/0/000/0/000", encoded_chunk(np.full((4, 4), 9, dtype="u1")))  # stored
    np.testing.assert_array_equal(zarrfuse.open_array(crc_array)[0:4, 0:4], 9)


def test_a_new_chunk_is_listed_while_open_and_after_close(crc_array):
    """Tools stat and list what they just created, before its first commit."""
    with in_process(str(crc_array)) as fs:
        assert fs.listdir("c/0/001/0") == ["000"]
        handle = fs.open("c/0/001/0/001", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        assert fs.listdir("c/0/001/0") == ["000", "001"]
        fs.pwrite(handle, encoded_chunk(np.full((4, 4), 3, dtype="u1")), 0)
        fs.close(handle)
        assert fs.listdir("c/0/001/0") == ["000", "001"]
        assert fs.listdir("c/0/000/0") == ["000", "001"]  # other leaves unchanged


def test_a_scratch_file_reopened_with_o_trunc_is_emptied(crc_array):
    """``echo a > .x.tmp; echo b > .x.tmp``: the second open truncates, it is no EIO."""
    with in_process(str(crc_array)) as fs:
        fs.write("c/0/000/0/.x.tmp", b"first, longer contents")
        fs.write("c/0/000/0/.x.tmp", b"second")
        assert fs.read("c/0/000/0/.x.tmp") == b"second"
        assert fs.size("c/0/000/0/.x.tmp") == 6
        fs.unlink("c/0/000/0/.x.tmp")
