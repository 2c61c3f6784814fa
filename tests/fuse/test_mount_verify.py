"""Real FUSE mounts: a written chunk is checked against the array's codecs before it is stored
(by default), so nothing written through the mount leaves an array zarr cannot read."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def cp(source: Path, target: Path) -> str:
    """``cp SOURCE TARGET``, asserting it fails; returns its stderr."""
    result = run_with_timeout(["cp", source, target], 30, check=False)
    assert result.returncode != 0, "cp stored a value zarr cannot decode"
    return result.stderr


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """1x128 uint8, uncompressed, two chunks of 64 bytes: the length check."""
    path = tmp_path / "plain"
    zarr.create_array(path, shape=(1, 128), chunks=(1, 64), dtype="u1", compressors=None,
                      fill_value=0)[:] = np.arange(128, dtype="u1").reshape(1, 128)
    return path


def test_cp_of_65_bytes_onto_a_64_byte_chunk_fails_and_keeps_the_chunk(plain, tmp_path):
    value = tmp_path / "v65"
    value.write_bytes(bytes(65))
    log = tmp_path / "zarrfuse.log"
    before = snapshot(plain)
    with mounted(plain, tmp_path / "mnt", "--log-file", str(log)) as mnt:
        chunk = mnt / "c/0/000/0/000"
        assert "Input/output error" in cp(value, chunk)  # EIO from close()
        assert chunk.read_bytes() == bytes(range(64)) and chunk.stat().st_size == 64
    assert snapshot(plain) == before
    np.testing.assert_array_equal(zarr.open_array(plain)[0], np.arange(128))
    logged = log.read_text()
    assert "refused to store chunk (0, 0)" in logged
    assert "is 65 bytes; the array's codecs (bytes) make every chunk exactly 64 bytes" in logged


def test_fsync_refuses_too_and_the_writer_can_put_it_right(plain, tmp_path):
    with mounted(plain, tmp_path / "mnt", "--verify") as mnt:  # --verify: still accepted
        fd = os.open(mnt / "c/0/000/0/001", os.O_RDWR)
        try:
            os.pwrite(fd, b"\xff", 0)
            os.pwrite(fd, b"\xff", 64)  # one byte too many
            with pytest.raises(OSError) as caught:
                os.fsync(fd)
            assert caught.value.errno == errno.EIO
            assert (plain / "c/0/1").read_bytes() == bytes(range(64, 128))
            os.ftruncate(fd, 64)  # a valid value again: stored at close
        finally:
            os.close(fd)
    assert zarr.open_array(plain)[0, 64:].tolist() == [255, *range(65, 128)]


def test_no_verify_stores_any_bytes_as_documented(plain, tmp_path):
    value = tmp_path / "v65"
    value.write_bytes(bytes(65))
    with mounted(plain, tmp_path / "mnt", "--no-verify") as mnt:
        run_with_timeout(["cp", value, mnt / "c/0/000/0/000"], 30)
    assert (plain / "c/0/0").read_bytes() == bytes(65)
    with pytest.raises(ValueError, match="reshape"):
        zarr.open_array(plain)[:]  # the array is broken: what the default check prevents


def test_garbage_onto_a_zstd_chunk_is_refused_and_a_real_chunk_stored(tmp_path):
    path = tmp_path / "zstd"
    a = zarr.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u2", fill_value=0,
                          compressors=[zarr.codecs.ZstdCodec()])
    a[:] = np.arange(64, dtype="u2").reshape(8, 8)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a zstd frame" * 4)
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        cp(garbage, leaf / "001")
        assert snapshot(path) == before
        run_with_timeout(["cp", leaf / "000", leaf / "001"], 30)  # a valid frame: stored
    after = zarr.open_array(path)[:]
    np.testing.assert_array_equal(after[0:4, 4:8], after[0:4, 0:4])


def test_a_shard_is_decoded_before_it_is_stored(tmp_path):
    path = tmp_path / "sharded"
    a = zarr.create_array(path, shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="u1",
                          compressors=None, fill_value=0)
    a[:] = np.arange(256, dtype="u1").reshape(16, 16)
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt") as mnt:
        leaf = mnt / "c/0/000/0"
        shard = (leaf / "000").read_bytes()
        noise = tmp_path / "noise"
        noise.write_bytes(bytes(b ^ 0x5A for b in shard))  # same length, index checksum wrong
        cp(noise, leaf / "001")
        assert snapshot(path) == before
        run_with_timeout(["cp", leaf / "000", leaf / "001"], 30)
    after = zarr.open_array(path)[:]
    np.testing.assert_array_equal(after[0:8, 8:16], after[0:8, 0:8])


def test_a_zarr_v2_array_is_checked_too(tmp_path):
    """v2 arrays reach the check as their v3 form (api/nodes.py): order F is a transpose."""
    path = tmp_path / "v2"
    a = zarr.create_array(path, shape=(4, 4), chunks=(2, 2), dtype="<u2", compressors=None,
                          zarr_format=2, order="F", fill_value=0)
    a[:] = np.arange(16, dtype="u2").reshape(4, 4)
    value = tmp_path / "v9"
    value.write_bytes(bytes(9))
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt") as mnt:
        chunk = next(p for p in mnt.rglob("*") if p.is_file() and p.stat().st_size == 8)
        cp(value, chunk)
        value.write_bytes(bytes(8))
        run_with_timeout(["cp", value, chunk], 30)  # the right size: stored
    assert snapshot(path) != before
    assert int(zarr.open_array(path)[:].sum()) < int(np.arange(16).sum())
