"""The write check, in process: a written chunk is decoded with the array's codecs before it
is stored (by default), so nothing written leaves an array zarr cannot read. The real mount's
side (``cp`` seeing EIO from close) is ``tests/fuse/test_mount_verify.py``."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.arrays import make_plain_array, snapshot
from tests.inprocess import in_process, refused


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    return make_plain_array(tmp_path / "plain")


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_chunk_of_the_wrong_length_is_refused_with_its_reason(plain, caplog):
    before = snapshot(plain)
    with caplog.at_level(logging.INFO), in_process(str(plain)) as fs:
        assert refused(lambda: fs.write("c/0/000/0/000", bytes(65))) == errno.EIO
        assert fs.read("c/0/000/0/000") == bytes(range(64))
        assert fs.size("c/0/000/0/000") == 64
    assert snapshot(plain) == before
    assert "refused to store chunk (0, 0)" in caplog.text
    assert ("is 65 bytes; the array's codecs (bytes) make every chunk exactly 64 bytes"
            in caplog.text)


def test_fsync_refuses_too_and_the_writer_can_put_it_right(plain):
    with in_process(str(plain)) as fs:
        handle = fs.open("c/0/000/0/001", os.O_RDWR)
        try:
            fs.pwrite(handle, b"\xff", 0)
            fs.pwrite(handle, b"\xff", 64)  # one byte too many
            assert refused(lambda: fs.fsync(handle)) == errno.EIO
            assert (plain / "c/0/1").read_bytes() == bytes(range(64, 128))
            fs.ftruncate(handle, 64)  # a valid value again: stored at close
        finally:
            fs.close(handle)
    assert zarr.open_array(plain)[0, 64:].tolist() == [255, *range(65, 128)]


def test_no_verify_stores_any_bytes_as_documented(plain):
    with in_process(str(plain), verify=False) as fs:
        fs.write("c/0/000/0/000", bytes(65))
    assert (plain / "c/0/0").read_bytes() == bytes(65)
    with pytest.raises(ValueError, match="reshape"):
        zarr.open_array(plain)[:]  # the array is broken: what the default check prevents


@pytest.mark.expect_log(r"refused to store chunk")
def test_garbage_onto_a_zstd_chunk_is_refused_and_a_real_chunk_stored(tmp_path):
    path = tmp_path / "zstd"
    a = zarr.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u2", fill_value=0,
                          compressors=[zarr.codecs.ZstdCodec()])
    a[:] = np.arange(64, dtype="u2").reshape(8, 8)
    before = snapshot(path)
    with in_process(str(path)) as fs:
        assert refused(lambda: fs.write("c/0/000/0/001", b"not a zstd frame" * 4)) == errno.EIO
        assert snapshot(path) == before
        fs.write("c/0/000/0/001", fs.read("c/0/000/0/000"))  # a valid frame: stored
    after = zarr.open_array(path)[:]
    np.testing.assert_array_equal(after[0:4, 4:8], after[0:4, 0:4])


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_shard_is_decoded_before_it_is_stored(tmp_path):
    path = tmp_path / "sharded"
    a = zarr.create_array(path, shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="u1",
                          compressors=None, fill_value=0)
    a[:] = np.arange(256, dtype="u1").reshape(16, 16)
    before = snapshot(path)
    with in_process(str(path)) as fs:
        shard = fs.read("c/0/000/0/000")
        noise = bytes(b ^ 0x5A for b in shard)  # same length, index checksum wrong
        assert refused(lambda: fs.write("c/0/000/0/001", noise)) == errno.EIO
        assert snapshot(path) == before
        fs.write("c/0/000/0/001", shard)
    after = zarr.open_array(path)[:]
    np.testing.assert_array_equal(after[0:8, 8:16], after[0:8, 0:8])


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_zarr_v2_array_is_checked_too(tmp_path):
    """v2 arrays reach the check as their v3 form (api/nodes.py): order F is a transpose."""
    path = tmp_path / "v2"
    a = zarr.create_array(path, shape=(4, 4), chunks=(2, 2), dtype="<u2", compressors=None,
                          zarr_format=2, order="F", fill_value=0)
    a[:] = np.arange(16, dtype="u2").reshape(4, 4)
    before = snapshot(path)
    with in_process(str(path)) as fs:
        chunk = next(f"c/{f}" for f in fs.walk("c") if fs.size(f"c/{f}") == 8)
        assert refused(lambda: fs.write(chunk, bytes(9))) == errno.EIO
        assert snapshot(path) == before
        fs.write(chunk, bytes(8))  # the right size: stored
    assert snapshot(path) != before
    assert int(zarr.open_array(path)[:].sum()) < int(np.arange(16).sum())
