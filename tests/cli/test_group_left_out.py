"""A group's view says what it leaves out (issue 23, points 3 and 4): ``zarrfuse mount``
prints, in one line, the arrays the view cannot show and why; and when the options suit no
array of the group, the mount is refused before it is made, in one line, as for one array."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def _group(root):
    group = zarr.open_group(root, mode="w")
    group.create_array("cells", data=np.ones((64, 64), dtype="u1"), chunks=(32, 32))
    group.create_array("depth", data=np.ones((64, 64), dtype="f8"), chunks=(32, 32))
    group.create_group("scale0").create_array(
        "camera", data=np.ones((64, 64), dtype="u2"), chunks=(32, 32))
    return root


def test_options_that_suit_no_member_are_refused_before_mounting(tmp_path):
    source, mnt = _group(tmp_path / "g.zarr"), tmp_path / "mnt"
    mnt.mkdir()
    result = run_with_timeout([*ZARRFUSE, "mount", source, mnt, "--max-children", "10"],
                              check=False)
    try:
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"zarrfuse: {source}: the options suit no array of the "
                                   "group (3 left out; ")
        assert "max_children must be at least" in lines[0]
        assert not is_mounted(mnt)
    finally:
        force_unmount(mnt)


def test_the_members_a_view_leaves_out_are_named_in_one_line(tmp_path):
    source, mnt = _group(tmp_path / "g.zarr"), tmp_path / "mnt"
    mnt.mkdir()
    result = run_with_timeout([*ZARRFUSE, "mount", source, mnt, "--format", "png",
                               "--read-only"], check=False)
    try:
        assert result.returncode == 0, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "zarrfuse: left out of the view: depth ("), result.stderr
        assert "cells" not in lines[0] and "camera" not in lines[0]
        assert sorted(p.name for p in (mnt / "cells").rglob("*.png"))  # the others show
    finally:
        force_unmount(mnt)
