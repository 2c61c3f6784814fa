"""``--suffix`` naming a format the files are not: one warning line, and the mount works."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from zarrfuse.filesystem.suffix_check import suffix_mismatch
from zarrfuse.tiff import create_tiff_array

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

ZSTD = {"codecs": [{"name": "bytes"}, {"name": "zstd"}]}


@pytest.mark.parametrize(("suffix", "fmt", "warns"), [
    (".tiff", "raw", True), (".TIF", "raw", True), (".png", "raw", True),
    (".jpg", "raw", True), (".tiff", "tiff", False), (".png", "tiff", True),
    (".npy", "npy", False), (".zst", "raw", False), (".raw", "raw", False), (None, "raw", False),
])
def test_which_suffixes_promise_a_format(suffix, fmt, warns):
    assert (suffix_mismatch(suffix, fmt, ZSTD) is not None) == warns


def _mount_stderr(source, mnt, *args: str) -> str:
    """Mount, check the mount works, return what `zarrfuse mount` printed on stderr."""
    import subprocess  # noqa: PLC0415  (only here)
    import sys  # noqa: PLC0415  (as above)

    mnt.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "zarrfuse", "mount", str(source), str(mnt),
                             "--read-only", *args], capture_output=True, text=True, timeout=60)
    try:
        assert result.returncode == 0, result.stderr
        assert any(mnt.iterdir())
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], timeout=30, check=False)
    return result.stderr


def test_tiff_suffix_on_zstd_chunks_warns_in_one_line(tmp_path):
    zarr.create_array(tmp_path / "a.zarr", shape=(8, 8), chunks=(4, 4), dtype="u1")[:] = 1
    stderr = _mount_stderr(tmp_path / "a.zarr", tmp_path / "mnt", "--suffix", ".tiff")
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "warning" in lines[0] and "zstd" in lines[0]
    assert _mount_stderr(tmp_path / "a.zarr", tmp_path / "mnt", "--suffix", ".tiff",
                         "--format", "tiff") == ""


def test_dual_access_shards_are_tiff_files_and_a_group_warns_once(tmp_path):
    root = tmp_path / "g.zarr"
    zarr.open_group(root, mode="w")
    create_tiff_array(root / "tiffs", shape=(32, 32), dtype="uint8", tile_shape=(16, 16))[:] = (
        np.ones((32, 32), "u1"))
    for name in ("one", "two"):
        zarr.create_array(root / name, shape=(4,), chunks=(2,), dtype="u1")[:] = 1
    stderr = _mount_stderr(root, tmp_path / "mnt", "--suffix", ".tiff")
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "2 arrays (one, two)" in lines[0], stderr
    assert _mount_stderr(root / "tiffs", tmp_path / "mnt", "--suffix", ".tiff") == ""
