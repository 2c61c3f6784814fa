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


def test_hold_keeps_the_colour_picture_mounted_until_enter(tmp_path):
    """``--hold`` (the default on a terminal) keeps the mounts, says so, and shows the
    photograph in colour until Enter; then it leaves nothing behind."""
    import subprocess  # noqa: PLC0415

    import tifffile  # noqa: PLC0415

    demo = subprocess.Popen([*ZARRFUSE, "demo", "--hold"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        said = []
        for line in demo.stdout:  # type: ignore[union-attr]
            said.append(line)
            if line.startswith("checked:"):
                break
        image = Path(re.search(r"    open: (\S+)", "".join(said)).group(1))
        assert is_mounted(image.parent)
        with tifffile.TiffFile(image) as tif:
            assert tif.series[0].axes == "YXS" and tif.series[0].shape[-1] == 3  # colour
        demo.stdin.write("\n")  # type: ignore[union-attr]
        demo.stdin.close()  # type: ignore[union-attr]
        out = "".join(said) + demo.stdout.read()  # type: ignore[union-attr]
        err = demo.stderr.read()  # type: ignore[union-attr]
        demo.wait(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=30)
    assert demo.returncode == 0, err
    assert "the mounts stay until you press Enter" in out
    assert not is_mounted(image.parent) and list(tmp_path.iterdir()) == []
