"""``--suffix`` naming a format the files are not: one warning line, and the mount works."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, run_with_timeout
from zarrfuse.filesystem.images.suffix_check import suffix_mismatch
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


def test_image_codecs_store_image_files():
    """A raw view's chunks are image files when the last codec writes them (its name says
    which format); behind a shard or a compressor they are not."""
    png = {"codecs": [{"name": "numcodecs.imagecodecs_png"}]}
    assert suffix_mismatch(".png", "raw", png) is None
    assert suffix_mismatch(".jpg", "raw", {"codecs": [{"name": "imagecodecs_jpeg"}]}) is None
    assert suffix_mismatch(".tif", "raw", {"codecs": [{"name": "imagecodecs_tiff"}]}) is None
    assert suffix_mismatch(".jpg", "raw", png) is not None
    zstd_after = {"codecs": [{"name": "imagecodecs_png"}, {"name": "zstd"}]}
    assert suffix_mismatch(".png", "raw", zstd_after) is not None
    sharded = {"codecs": [{"name": "sharding_indexed", "configuration": {
        "codecs": [{"name": "imagecodecs_png"}]}}]}
    assert suffix_mismatch(".png", "raw", sharded) is not None


def _mount_stderr(source, mnt, *args: str) -> str:
    """Mount, check the mount works, return what `zarrfuse mount` printed on stderr."""
    mnt.mkdir(exist_ok=True)
    try:
        result = run_with_timeout([*ZARRFUSE, "mount", str(source), str(mnt), "--read-only",
                                   *args], 60, check=False)
        assert result.returncode == 0, result.stderr
        assert is_mounted(mnt) and any(mnt.iterdir())
    finally:
        assert force_unmount(mnt)
    return result.stderr


def test_tiff_suffix_on_zstd_chunks_warns_in_one_line(tmp_path):
    zarr.create_array(tmp_path / "a.zarr", shape=(8, 8), chunks=(4, 4), dtype="u1")[:] = 1
    stderr = _mount_stderr(tmp_path / "a.zarr", tmp_path / "mnt", "--suffix", ".tiff")
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "warning" in lines[0] and "zstd" in lines[0]
    log = tmp_path / "daemon.log"  # the daemon logs it too (once per array, as it shows it)
    _mount_stderr(tmp_path / "a.zarr", tmp_path / "mnt", "--suffix", ".tiff", "--log-file",
                  str(log))
    assert "--suffix .tiff on /: its chunk files are the stored Zarr chunks" in log.read_text()
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


def test_a_suffix_without_a_leading_dot_warns_in_one_line(tmp_path):
    zarr.create_array(tmp_path / "a.zarr", shape=(8, 8), chunks=(4, 4), dtype="u1")[:] = 1
    stderr = _mount_stderr(tmp_path / "a.zarr", tmp_path / "mnt", "--suffix", "tiff")
    assert stderr.strip() == ("zarrfuse: warning: --suffix tiff has no leading dot: chunk files "
                              "are named like 000tiff; did you mean --suffix .tiff?")
