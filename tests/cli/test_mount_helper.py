"""``mount -t fuse.zarrfuse`` and fstab lines, through mount(8), for real.

mount(8) runs ``/sbin/mount.fuse.zarrfuse`` when it exists; without it, ``mount.fuse3``
runs ``zarrfuse SOURCE DIR -o OPTIONS`` from PATH. Both paths are tested, with this checkout's
console scripts linked into /sbin and /usr/local/bin for the duration of a test (and only if
nothing is installed there already). Unmounting is ``umount`` (root) and ``fusermount3 -u``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import (
    daemon_pids,
    force_unmount,
    is_mounted,
    requires_fuse,
    run_with_timeout,
    wait_exited,
    wait_unmounted,
)

BIN = Path(sys.executable).parent
HELPER = Path("/sbin/mount.fuse.zarrfuse")
ON_PATH = Path("/usr/local/bin/zarrfuse")

pytestmark = [
    requires_fuse,
    pytest.mark.fuse,
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("mount") is None, reason="needs mount(8)"),
]


@contextmanager
def linked(link: Path, target: Path) -> Iterator[None]:
    """``link`` -> ``target`` for the duration; skips if something else is installed there."""
    if not target.exists():
        pytest.skip(f"{target} is not installed (pip install -e . makes it)")
    if os.path.lexists(link):
        if os.path.islink(link) and os.readlink(link) == str(target):
            yield  # left by an interrupted run: use it, and leave it
            return
        pytest.skip(f"{link} exists already; not replacing an installed zarrfuse")
    link.symlink_to(target)
    try:
        yield
    finally:
        link.unlink()


@contextmanager
def absent(path: Path) -> Iterator[None]:
    if os.path.lexists(path):
        pytest.skip(f"{path} is installed: mount(8) would use it instead")
    yield


@pytest.fixture
def array_v3(tmp_path: Path) -> Path:
    path = tmp_path / "my arr"  # a blank, as fstab writes \040
    a = zarr.create_array(path, shape=(4, 6), chunks=(2, 3), dtype="u1")
    a[:] = np.arange(24, dtype="u1").reshape(4, 6)
    return path


@contextmanager
def cleaned(mnt: Path) -> Iterator[Path]:
    """Unmount and stop the daemon whatever happens."""
    try:
        yield mnt
    finally:
        force_unmount(mnt)
        for pid in daemon_pids(mnt):
            if not wait_exited(pid):
                os.kill(pid, 9)


def mount_entry(mnt: Path) -> tuple[str, str, str]:
    """(fstype, mount options, super options) of ``mnt`` from /proc/self/mountinfo."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(mnt):
            sep = fields.index("-")
            return fields[sep + 1], fields[5], fields[-1]
    raise AssertionError(f"{mnt} is not mounted")


def files_under(mnt: Path) -> list[str]:
    out = run_with_timeout(["find", mnt, "-type", "f"], 20).stdout.split("\n")
    return sorted(os.path.relpath(p, mnt) for p in out if p)


def unmount_with(cmd: list[str], mnt: Path) -> None:
    pids = daemon_pids(mnt)
    assert len(pids) == 1, pids
    run_with_timeout([*cmd, mnt], 20)
    assert wait_unmounted(mnt)
    assert wait_exited(pids[0]), "the daemon did not exit after the unmount"


def test_mount_t_fuse_zarrfuse_with_options(array_v3, mountpoint):
    with linked(HELPER, BIN / "mount.fuse.zarrfuse"), cleaned(mountpoint):
        run_with_timeout(
            ["mount", "-t", "fuse.zarrfuse", array_v3, mountpoint, "-o",
             "ro,suffix=.raw,max_children=100,uid=1234,gid=2345,umask=027,allow_other,noexec"],
            60,
        )
        fstype, mount_options, super_options = mount_entry(mountpoint)
        assert fstype == "fuse.zarrfuse"
        assert "ro" in mount_options.split(",") and "noexec" in mount_options.split(",")
        assert "allow_other" in super_options.split(",")
        assert files_under(mountpoint) == [
            "c/0/00/0/00.raw", "c/0/00/0/01.raw", "c/0/01/0/00.raw", "c/0/01/0/01.raw",
            "zarr.json",
        ]  # max_children=100: two-digit fanout groups
        chunk = mountpoint / "c/0/00/0/00.raw"
        st = os.stat(chunk)
        assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o777)) == (1234, 2345, "0o440")
        assert chunk.read_bytes() == (array_v3 / "c/0/0").read_bytes()
        unmount_with(["umount"], mountpoint)


def test_fstab_line_mounts_and_fusermount_unmounts(array_v3, tmp_path, mountpoint):
    fstab = tmp_path / "fstab"
    source = str(array_v3).replace(" ", "\\040")
    fstab.write_text(
        "# a test fstab\n"
        f"{source} {mountpoint} fuse.zarrfuse "
        "defaults,noauto,nofail,_netdev,x-systemd.automount,x-systemd.idle-timeout=60,"
        "ro,suffix=.tiff,umask=077,scratch_mb=0 0 0\n"
    )
    with linked(HELPER, BIN / "mount.fuse.zarrfuse"), cleaned(mountpoint):
        run_with_timeout(["mount", "-T", fstab, mountpoint], 60)
        assert mount_entry(mountpoint)[0] == "fuse.zarrfuse"
        assert "c/0/000/0/000.tiff" in files_under(mountpoint)
        assert oct(os.stat(mountpoint / "zarr.json").st_mode & 0o777) == "0o400"
        with pytest.raises(OSError, match="Read-only file system"):
            (mountpoint / "c/0/000/0/000.tiff").write_bytes(b"x")
        unmount_with(["fusermount3", "-u"], mountpoint)


def test_mount_helper_failure_is_reported_by_mount(tmp_path, mountpoint):
    with linked(HELPER, BIN / "mount.fuse.zarrfuse"), cleaned(mountpoint):
        result = run_with_timeout(
            ["mount", "-t", "fuse.zarrfuse", tmp_path / "missing", mountpoint, "-o", "ro"], 60,
            check=False,
        )
        assert result.returncode == 32
        assert "mount.fuse.zarrfuse: " in result.stderr and "does not exist" in result.stderr
        assert not is_mounted(mountpoint)


@pytest.mark.skipif(shutil.which("mount.fuse3") is None, reason="needs fuse3's mount.fuse3")
def test_without_the_helper_mount_fuse3_runs_zarrfuse(array_v3, mountpoint):
    """mount.fuse3 runs ``zarrfuse SOURCE DIR -o ro,suffix=.raw,dev,suid`` from PATH."""
    env = {**os.environ, "PATH": f"{ON_PATH.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    with absent(HELPER), linked(ON_PATH, BIN / "zarrfuse"), cleaned(mountpoint):
        run_with_timeout(
            ["mount", "-t", "fuse.zarrfuse", array_v3, mountpoint, "-o", "ro,suffix=.raw"], 60,
            env=env,
        )
        assert mount_entry(mountpoint)[0] == "fuse.zarrfuse"
        assert "c/0/000/0/001.raw" in files_under(mountpoint)
        unmount_with(["umount"], mountpoint)
