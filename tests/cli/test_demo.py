"""The demo shows a real picture (issue 23 point 2): it builds an OME-Zarr pyramid of a
photograph offline, mounts it as TIFF files and as an OME-TIFF, prints the files to open,
checks them, and leaves nothing behind: no temporary directory, no mount."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line for line in f if f" {path}" in line]


def _stop(demo, tmp_path: Path) -> None:
    """A demo a failed test left running: killed, and its mounts taken down."""
    if demo.poll() is None:
        demo.kill()
        demo.wait(timeout=30)
    for line in _mounts_under(tmp_path):
        force_unmount(line.split()[4])


def _lines_until(demo, start: str) -> list[str]:
    """What the demo printed, up to the first line that starts with ``start``."""
    said = []
    for line in demo.stdout:
        said.append(line)
        if line.startswith(start):
            break
    return said


def test_the_demo_shows_a_picture_and_leaves_nothing_behind(tmp_path):
    result = run_with_timeout([*ZARRFUSE, "demo"], 90, check=False,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "checked: every file holds exactly the source pixels" in out
    opened = re.findall(r"open(?:, for example)?: (\S+)  \((.+)\)", out)
    assert [Path(path).name for path, _ in opened] == [
        "y000-x000.tiff", "astronaut.composite.tif", "astronaut.imagej.tif",
        "astronaut.ome.tif", "astronaut.preview.png"]
    assert "ImageJ 1.x" in opened[2][1] and "Fiji" in opened[3][1]
    assert "thumbnail" in opened[4][1]
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
        said = _lines_until(demo, "checked:")
        image = Path(re.search(r"    open: (\S+\.ome\.tif)", "".join(said)).group(1))
        assert is_mounted(image.parent)
        with tifffile.TiffFile(image) as tif:
            assert tif.series[0].axes == "YXS" and tif.series[0].shape[-1] == 3  # colour
        demo.stdin.write("\n")  # type: ignore[union-attr]
        demo.stdin.close()  # type: ignore[union-attr]
        out = "".join(said) + demo.stdout.read()  # type: ignore[union-attr]
        err = demo.stderr.read()  # type: ignore[union-attr]
        demo.wait(timeout=60)
    finally:
        _stop(demo, tmp_path)
    assert demo.returncode == 0, err
    assert "the mounts stay until you press Enter" in out
    assert not is_mounted(image.parent) and list(tmp_path.iterdir()) == []


def test_hold_with_no_terminal_holds_until_a_signal(tmp_path):
    """``--hold`` with stdin at its end (run by a script, a service) says it holds until a
    signal, and does: every file it named is there, under the mount, until SIGTERM; then
    it unmounts and leaves nothing behind. Every file of the whole-image mount is named."""
    import signal  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    demo = subprocess.Popen([*ZARRFUSE, "demo", "--hold"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        said = _lines_until(demo, "no terminal")
        assert said and said[-1].startswith("no terminal (stdin is at its end): the mounts "
                                            f"stay until SIGINT or SIGTERM (kill {demo.pid})")
        named = re.findall(r"    open: (\S+)", "".join(said))
        whole = Path(named[-1]).parent
        assert is_mounted(whole) and sorted(str(f) for f in whole.iterdir()) == named
        demo.send_signal(signal.SIGTERM)
        out, err = demo.communicate(timeout=60)
    finally:
        _stop(demo, tmp_path)
    assert demo.returncode == 0, err
    assert "unmounted" in out and not is_mounted(whole) and list(tmp_path.iterdir()) == []
