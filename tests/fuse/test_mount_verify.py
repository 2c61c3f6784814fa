"""Real FUSE mounts: a written chunk is checked against the array's codecs before it is stored
(by default), and ``cp`` sees the refusal as EIO from close(). The rules themselves (lengths,
codecs, shards, v2, fsync, ``--no-verify``) are tested in process:
``tests/filesystem/test_inprocess_verify.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.arrays import make_plain_array, snapshot
from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def cp(source: Path, target: Path) -> str:
    """``cp SOURCE TARGET``, asserting it fails; returns its stderr."""
    result = run_with_timeout(["cp", source, target], 30, check=False)
    assert result.returncode != 0, "cp stored a value zarr cannot decode"
    return result.stderr


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    return make_plain_array(tmp_path / "plain")


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
