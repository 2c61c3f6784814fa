"""The demo shows a real picture (issue 23 point 2): it builds an OME-Zarr pyramid of a
photograph offline, mounts it as TIFF files and as an OME-TIFF, prints the files to open,
checks them, and leaves nothing behind: no temporary directory, no mount."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.mounting import ZARRFUSE, is_mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line for line in f if f" {path}" in line]


def test_the_demo_shows_a_picture_and_leaves_nothing_behind(tmp_path):
    result = run_with_timeout([*ZARRFUSE, "demo"], 90, check=False,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "checked: every file holds exactly the source pixels" in out
    opened = re.findall(r"open(?:, for example)?: (\S+)", out)
    assert len(opened) == 2 and opened[0].endswith(".tiff") and opened[1].endswith(".ome.tif")
    root = Path(re.search(r"removed (\S+)", out).group(1))
    assert root.parent == tmp_path and not root.exists()
    assert list(tmp_path.iterdir()) == []
    assert not _mounts_under(root)


def test_the_demo_in_a_directory_keeps_the_image_and_unmounts(tmp_path):
    where = tmp_path / "demo"
    result = run_with_timeout([*ZARRFUSE, "demo", where], 90, check=False)
    assert result.returncode == 0, result.stderr
    assert (where / "astronaut.ome.zarr" / "zarr.json").is_file()
    for mnt in ("tiff", "ome-tiff"):
        assert not is_mounted(where / mnt)
        assert list((where / mnt).iterdir()) == []
