"""Mounts handed by Kubernetes (issue 24, point 5): a privileged helper opens ``/dev/fuse``,
mounts with ``fd=N`` and hands the descriptor to ``zarrfuse mount SOURCE /dev/fd/N``, which
serves it without ``CAP_SYS_ADMIN`` and exits cleanly when the mount is taken away.

The helper here is the test itself with util-linux ``mount -i`` (as CSI drivers and
``mount.fuse3 -o drop_privileges`` do it); the daemon runs under ``setpriv`` with
CAP_SYS_ADMIN out of its bounding set, so it could not mount or unmount anything itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

CAP_SYS_ADMIN = 21
UNPRIVILEGED = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]


def _files(root: Path) -> dict[str, bytes]:
    found = run_with_timeout(["find", root, "-type", "f"]).stdout.split()
    return {str(Path(p).relative_to(root)): Path(p).read_bytes() for p in found}


def _effective_caps(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff for {pid}")


def _descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    direct = [int(c) for c in children.read_text().split()] if children.exists() else []
    return direct + [d for c in direct for d in _descendants(c)]


@contextmanager
def _helper_mount(mnt: Path) -> Iterator[int]:
    """What the privileged helper does: open /dev/fuse and mount it at ``mnt`` with fd=N;
    yields N. Whatever happens, the mount comes down and the descriptor is closed."""
    mnt.mkdir()
    fd = os.open("/dev/fuse", os.O_RDWR)
    try:
        run_with_timeout(
            ["mount", "-i", "-t", "fuse.zarrfuse", "-o",
             f"fd={fd},rootmode=40000,user_id=0,group_id=0,ro", "zarrfuse-test", mnt],
            pass_fds=(fd,),
        )
        yield fd
    finally:
        os.close(fd)
        force_unmount(mnt)


@pytest.fixture
def array(tmp_path: Path) -> Path:
    data = np.arange(64 * 48, dtype="u2").reshape(64, 48)
    zarr.create_array(tmp_path / "a", data=data, chunks=(32, 16))
    return tmp_path / "a"


@pytest.mark.parametrize("foreground", [True, False], ids=["foreground", "background"])
def test_a_handed_descriptor_is_served_without_cap_sys_admin_until_unmounted(
    tmp_path, array, foreground
):
    with mounted(array, tmp_path / "plain", "--read-only") as plain:
        expected = _files(plain)
    assert expected  # the comparison means something
    mnt = tmp_path / "mnt"
    with _helper_mount(mnt) as fd:
        argv = [*UNPRIVILEGED, *ZARRFUSE, "mount", array, f"/dev/fd/{fd}", "--read-only",
                *(["--foreground"] if foreground else [])]
        starter = subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
        try:
            if not foreground:  # the command returns once the daemon serves
                _, err = starter.communicate(timeout=30)
                assert starter.returncode == 0, err
            assert _files(mnt) == expected
            daemons = [starter.pid, *_descendants(starter.pid)] if foreground else [
                int(p.name) for p in Path("/proc").iterdir()
                if p.name.isdigit() and f"/dev/fd/{fd}".encode() in _cmdline(p)
                and b"--foreground" in _cmdline(p)
            ]
            assert daemons, "no daemon found"
            for pid in daemons:
                assert not _effective_caps(pid) & (1 << CAP_SYS_ADMIN), pid
            run_with_timeout(["umount", mnt])  # the helper takes the mount away
            assert not is_mounted(mnt)
            deadline = time.monotonic() + 15
            while any(Path(f"/proc/{pid}").exists() and "Z" not in
                      Path(f"/proc/{pid}/stat").read_text().split()[2] for pid in daemons):
                assert time.monotonic() < deadline, "the daemon did not exit after umount"
                time.sleep(0.1)
            if foreground:
                assert starter.wait(timeout=5) == 0, starter.stderr.read() if starter.stderr else ""
        finally:
            if starter.poll() is None:
                starter.kill()
                starter.wait(timeout=10)


def test_a_descriptor_that_is_not_open_is_refused_in_one_line(array):
    result = run_with_timeout([*ZARRFUSE, "mount", array, "/dev/fd/57", "--read-only"],
                              check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "zarrfuse: /dev/fd/57: descriptor 57 is not open in this process (the program that "
        "mounted /dev/fuse with fd=57 must leave it open for zarrfuse)"
    )


def test_mount_fuse3_drop_privileges_hands_the_descriptor_to_zarrfuse(tmp_path, array):
    """libfuse's own helper: ``mount.fuse3 zarrfuse#SOURCE MNT -o drop_privileges`` mounts,
    drops every capability and runs ``zarrfuse SOURCE /dev/fd/N``."""
    with mounted(array, tmp_path / "plain", "--read-only") as plain:
        expected = _files(plain)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        run_with_timeout(["mount.fuse3", f"zarrfuse#{array}", mnt, "-o", "drop_privileges,ro"],
                         env=env)
        assert _files(mnt) == expected
        daemons = [
            int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and int(p.name) != os.getpid()
            and b"zarrfuse\x00mount" in _cmdline(p) and b"/dev/fd/" in _cmdline(p)
        ]
        assert daemons, "no daemon found"
        for pid in daemons:
            assert _effective_caps(pid) == 0, pid  # drop_privileges dropped them all
        run_with_timeout(["umount", mnt])
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{pid}").exists() for pid in daemons):
            assert time.monotonic() < deadline, "the daemon did not exit after umount"
            time.sleep(0.1)
    finally:
        force_unmount(mnt)


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:  # exited meanwhile
        return b""
