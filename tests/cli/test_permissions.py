"""Who sees what: ownership and modes (--uid, --gid, --umask), allow_other, and mounting as a
user other than root. Every mount is real, unmounted in teardown, and times out rather than
hangs."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.operating import REPO, chunk_files, mount_test, stats
from tests.mounting import (
    daemon_pid,
    daemon_pids,
    force_unmount,
    is_mounted,
    mounted,
    requires_fuse,
    run_with_timeout,
    wait_exited,
    wait_unmounted,
)
from zarrfuse.daemon import control

# --- ownership and modes --------------------------------------------------------------------


def stat_of(path: Path) -> tuple[str, int, int]:
    """(octal mode, uid, gid) as stat(1) prints them."""
    mode, uid, gid = run_with_timeout(["stat", "-c", "%a %u %g", path], 10).stdout.split()
    return mode, int(uid), int(gid)


@pytest.mark.parametrize(
    ("args", "dir_mode", "file_mode"),
    [
        ((), "755", "644"),
        (("--umask", "027"), "750", "640"),
        (("--umask", "0"), "777", "666"),
        (("--umask", "002", "--read-only"), "555", "444"),
    ],
    ids=["default", "027", "000", "read-only"],
)
@mount_test
def test_modes_follow_umask_as_seen_by_stat(args, dir_mode, file_mode, array_v3, mountpoint):
    with mounted(array_v3, mountpoint, *args) as mnt:
        chunk = chunk_files(mnt)[0]
        assert stat_of(mnt)[0] == dir_mode
        assert stat_of(chunk.parent)[0] == dir_mode
        assert stat_of(chunk)[0] == file_mode
        assert stat_of(mnt / "zarr.json")[0] == file_mode.replace("6", "4")  # never writable


@mount_test
def test_uid_and_gid_as_seen_by_stat(array_v3, mountpoint):
    with mounted(array_v3, mountpoint, "--uid", "1234", "--gid", "2345") as mnt:
        for path in (mnt, mnt / "zarr.json", chunk_files(mnt)[0]):
            assert stat_of(path)[1:] == (1234, 2345), path
    with mounted(array_v3, mountpoint) as mnt:  # default: the mounting user
        assert stat_of(chunk_files(mnt)[0])[1:] == (os.getuid(), os.getgid())


# --- other users: allow_other, and mounting as non-root --------------------------------------

needs_useradd = pytest.mark.skipif(
    shutil.which("useradd") is None or shutil.which("runuser") is None or os.geteuid() != 0,
    reason="needs root, useradd and runuser",
)


@pytest.fixture(scope="module")
def other_user() -> Iterator[pwd.struct_passwd]:
    """A throw-away user (removed afterwards)."""
    if shutil.which("useradd") is None or shutil.which("runuser") is None or os.geteuid() != 0:
        pytest.skip("needs root, useradd and runuser")
    name = f"zft{os.getpid() % 100000}"
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        uid = pwd.getpwnam(name).pw_uid
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(f"/tmp/zarrfuse-{uid}", ignore_errors=True)  # its control socket dir


@pytest.fixture
def shared_dir(other_user) -> Iterator[Path]:
    """A directory everyone can enter (pytest's tmp_path is root-only), owned by the user."""
    path = Path(tempfile.mkdtemp(prefix="zarrfuse-ops-", dir="/tmp"))
    path.chmod(0o755)
    os.chown(path, other_user.pw_uid, other_user.pw_gid)
    try:
        yield path
    finally:
        for mnt in path.glob("*mnt*"):
            if is_mounted(mnt):
                force_unmount(mnt)
            for pid in daemon_pids(mnt):
                if not wait_exited(pid):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


def as_user(user: pwd.struct_passwd, *cmd, **kwargs) -> subprocess.CompletedProcess[str]:
    return run_with_timeout(["runuser", "-u", user.pw_name, "--", *cmd], 60, check=False, **kwargs)


def copy_for(user: pwd.struct_passwd, source: Path, where: Path) -> Path:
    target = where / source.name
    shutil.copytree(source, target)
    for p in [target, *target.rglob("*")]:
        os.chown(p, user.pw_uid, user.pw_gid)
    return target


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(90)
def test_allow_other_lets_other_users_in(other_user, shared_dir, array_v3):
    mnt = shared_dir / "mnt"
    mnt.mkdir()
    with mounted(array_v3, mnt):  # root's mount, without allow_other: only root gets in
        denied = as_user(other_user, "stat", "-c", "%a", mnt)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    with mounted(array_v3, mnt, "-o", "allow_other", "--umask", "077"):
        assert as_user(other_user, "stat", "-c", "%a", mnt).stdout.strip() == "700"
        # default_permissions: the kernel applies the modes zarrfuse shows
        refused = as_user(other_user, "ls", mnt)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr
    with mounted(array_v3, mnt, "-o", "allow_other", "--uid", str(other_user.pw_uid)):
        listing = as_user(other_user, "ls", mnt)
        assert listing.returncode == 0 and "zarr.json" in listing.stdout.split()


@contextmanager
def _python_for(user: pwd.struct_passwd) -> Iterator[list[str]]:
    """A Python of this version that ``user`` can execute (``env`` assignments, then the
    interpreter): the system's if it is the same version, else this one's installation
    bind-mounted where anyone can enter (the test's Python may live under /root, as pyenv's
    do), unmounted afterwards."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = "/usr/bin/python3"
    probe = as_user(user, system, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
    if probe.returncode == 0 and probe.stdout.strip() == version:
        yield [system]
        return
    reachable = Path(tempfile.mkdtemp(prefix="zarrfuse-test-python-"))
    reachable.chmod(0o755)
    bound = subprocess.run(["mount", "--bind", "-o", "ro", sys.base_prefix, reachable],
                           capture_output=True, text=True)
    try:
        if bound.returncode != 0:
            pytest.skip(f"no Python {version} that {user.pw_name} can run: {bound.stderr}")
        yield [f"LD_LIBRARY_PATH={reachable / 'lib'}", str(reachable / "bin" / f"python{version}")]
    finally:
        if bound.returncode == 0:  # lazily: the user's daemon may still be exiting
            subprocess.run(["umount", "--lazy", reachable], check=True, capture_output=True)
        reachable.rmdir()


@pytest.fixture
def user_zarrfuse(other_user) -> Iterator[list[str]]:
    """How ``other_user`` runs this checkout's zarrfuse: this Python if it can execute it,
    else a Python of the same version it can (see ``_python_for``) with the venv's packages
    on PYTHONPATH."""
    if as_user(other_user, sys.executable, "-c", "import zarrfuse").returncode == 0:
        yield [sys.executable, "-m", "zarrfuse"]
        return
    site = next(p for p in sys.path if p.endswith("site-packages"))
    with _python_for(other_user) as python:
        command = ["env", f"PYTHONPATH={REPO}:{site}", *python, "-m", "zarrfuse"]
        runs = as_user(other_user, *command, "--version")
        assert runs.returncode == 0, f"{other_user.pw_name} cannot run {command}: {runs.stderr}"
        yield command


@contextmanager
def fuse_device_mode(mode: int) -> Iterator[None]:
    """/dev/fuse with ``mode`` for the test (as udev would set it), restored afterwards. The
    device is the machine's: tests on other workers that set its mode wait on one lock."""
    with open("/tmp/zarrfuse-tests-dev-fuse.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
        os.chmod("/dev/fuse", mode)
        try:
            yield
        finally:
            os.chmod("/dev/fuse", old)


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(120)
def test_non_root_user_mounts_and_unmounts(other_user, shared_dir, array_v3, user_zarrfuse):
    """Through the setuid fusermount3, on a directory the user owns, as on any Debian host.

    libfuse and fusermount3 both open /dev/fuse with the user's own rights. Debian's udev makes
    it 0666; where it is 0600 (no udev, as in some VMs and containers) no user can mount, and
    zarrfuse says so in one line. Both cases are checked by setting the mode for the test.
    """
    zarrfuse = user_zarrfuse
    source = copy_for(other_user, array_v3, shared_dir)
    mnt = shared_dir / "mnt"
    mnt.mkdir()
    os.chown(mnt, other_user.pw_uid, other_user.pw_gid)

    with fuse_device_mode(0o600):
        refused = as_user(other_user, *zarrfuse, "mount", source, mnt)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"zarrfuse: /dev/fuse is not readable and writable by uid {other_user.pw_uid} "
            "(mode 0600); non-root mounts need it to be 0666, as udev makes it on most systems"
        )
        assert not is_mounted(mnt)

    with fuse_device_mode(0o666):
        try:
            result = as_user(other_user, *zarrfuse, "mount", source, mnt, "--umask", "077")
            assert result.returncode == 0, result.stderr
            assert is_mounted(mnt)
            listing = as_user(other_user, "stat", "-c", "%a %u %n", mnt / "zarr.json")
            assert listing.stdout.split() == ["400", str(other_user.pw_uid), str(mnt / "zarr.json")]
            # Without allow_other not even root may look inside a user's FUSE mount.
            with pytest.raises(PermissionError):
                os.stat(mnt / "zarr.json")
            user_stats = as_user(other_user, *zarrfuse, "stats", "--json", mnt)
            assert json.loads(user_stats.stdout)["mountpoint"] == str(mnt)
            assert control.mount_owner(str(mnt)) == other_user.pw_uid
            assert stats(mnt)["pid"] == daemon_pid(mnt)  # root finds the user's socket too
            unmounted = as_user(other_user, "fusermount3", "-u", mnt)
            assert unmounted.returncode == 0, unmounted.stderr
            assert wait_unmounted(mnt)
        finally:
            force_unmount(mnt)


# --- refusals that say what to fix (issue 33 point 2) ----------------------------------------


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(120)
def test_allow_other_without_user_allow_other_says_what_to_add(
    other_user, shared_dir, array_v3, user_zarrfuse
):
    """fusermount3 refuses a user's allow_other unless /etc/fuse.conf says user_allow_other
    (Debian's default leaves it commented out); its words and the fix reach the user."""
    conf = Path("/etc/fuse.conf")
    lines = conf.read_text().splitlines() if conf.exists() else []
    if any(line.strip() == "user_allow_other" for line in lines):
        pytest.skip("this machine's /etc/fuse.conf allows allow_other to every user")
    source = copy_for(other_user, array_v3, shared_dir)
    mnt = shared_dir / "mnt"
    mnt.mkdir()
    os.chown(mnt, other_user.pw_uid, other_user.pw_gid)
    try:
        with fuse_device_mode(0o666):  # as udev makes it: the refusal is fusermount3's
            result = as_user(other_user, *user_zarrfuse, "mount", source, mnt, "-o",
                             "allow_other", "--log-file", shared_dir / "log")
        assert result.returncode == 1
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"zarrfuse: cannot mount at {mnt}: fusermount3: "), line
        assert "add the line user_allow_other to /etc/fuse.conf" in line, line
        assert not is_mounted(mnt)
    finally:
        force_unmount(mnt)


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(60)
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_root_without_cap_sys_admin_is_told_the_container_flags(array_v3, mountpoint):
    """Root without CAP_SYS_ADMIN, as in a Docker container started without
    --cap-add SYS_ADMIN: mount(2) and then fusermount3 are refused; the line says so and
    names the flags."""
    result = run_with_timeout(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin",
         sys.executable, "-m", "zarrfuse", "mount", array_v3, mountpoint], 60, check=False)
    try:
        assert result.returncode == 1
        (line,) = result.stderr.strip().splitlines()
        assert "Operation not permitted" in line, line
        assert "--cap-add SYS_ADMIN --device /dev/fuse" in line, line
        assert not is_mounted(mountpoint)
    finally:
        force_unmount(mountpoint)
