"""Helpers for every test that mounts: nothing waits forever, and every mount comes down.

A stuck FUSE daemon makes anything that touches its mount (``ls``, ``stat``, even Python's
``os.path.exists``) block forever, and a dead one makes it fail with ENOTCONN. So these helpers
read ``/proc/self/mountinfo`` (which never blocks) to tell whether something is mounted, run
every command with a timeout, and unmount in ``finally`` with escalating force: ``fusermount3
-u``, then ``fusermount3 -u -z``, then ``umount -l``, then SIGKILL for a daemon that will not
exit. They deliberately do not use ``zarrfuse.fuse.mountpoint``: the tests check that code.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from zarrfuse.fuse.cache_times import TEST_CLOCK

__all__ = [
    "ZARRFUSE",
    "MountClock",
    "daemon_pid",
    "daemon_pids",
    "force_unmount",
    "is_dead_mount",
    "is_mounted",
    "mounted",
    "mountpoint",
    "requires_fuse",
    "run_with_timeout",
    "wait_exited",
    "wait_mounted",
    "wait_unmounted",
]

ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
"""The command line of ``zarrfuse`` in this test environment."""
UNMOUNT_TIMEOUT = 10.0
EXIT_TIMEOUT = 10.0

requires_fuse = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or os.geteuid() != 0, reason="needs /dev/fuse and root"
)


def run_with_timeout(
    cmd: Sequence[str | os.PathLike[str]], timeout: float = 30, *, check: bool = True, **kwargs
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (``ls``, ``find``, ``cp``, ``zarrfuse``...) and return its text output.

    Fails the test, instead of hanging it, if ``cmd`` runs longer than ``timeout`` seconds
    (then its whole process group is killed); with ``check``, also if it exits non-zero.
    """
    argv = [os.fspath(c) for c in cmd]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, **kwargs,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable, blocked in the kernel: abandon it
            out, err = "", ""
        pytest.fail(f"{argv} did not finish within {timeout:g} s (a stuck mount?)\n{out}{err}")
    result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if check and result.returncode != 0:
        pytest.fail(f"{argv} exited with {result.returncode}\nstdout: {out}\nstderr: {err}")
    return result


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _quietly(cmd: list[str], timeout: float = UNMOUNT_TIMEOUT) -> bool:
    """Run ``cmd`` for teardown: True if it succeeded; never raises, never hangs."""
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    except OSError:
        return False
    try:
        return proc.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        with suppress(subprocess.TimeoutExpired):
            proc.wait(2)
        return False


def _mountinfo_points() -> list[str]:
    """Mount points from /proc/self/mountinfo, octal escapes (\\040 for space...) decoded."""
    points = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            field = line.split(b" ")[4]
            decoded = field.decode("unicode_escape").encode("latin-1")
            points.append(os.fsdecode(decoded))
    return points


def _canonical(path: str | os.PathLike[str]) -> str:
    """Absolute and symlink-free, resolving only the parent (stat of the mount could block)."""
    head, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(head), name)


def is_mounted(path: str | os.PathLike[str]) -> bool:
    """Whether anything, live or dead, is mounted exactly at ``path``."""
    return _canonical(path) in _mountinfo_points()


def wait_for(condition, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


class MountClock:
    """The clock every TTL of the mounts a test starts from now on reads (the test seam
    ``ZARRFUSE_TEST_CLOCK``, docs/contributing.md): what a mount learnt outlives its TTL when
    the test moves the clock on (``ahead``), not after a sleep. Their kernels keep nothing
    for a TTL (their timeouts are 0), so what the mount then answers is what shows."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.path = tmp_path / "mount-clock"
        self.seconds = 0.0
        self.path.write_text("0")
        monkeypatch.setenv(TEST_CLOCK, str(self.path))

    def ahead(self, seconds: float) -> None:
        """Move the mounts' clock ``seconds`` on, at once (one rename: never half written)."""
        self.seconds += seconds
        temp = self.path.with_name(self.path.name + ".new")
        temp.write_text(repr(self.seconds))
        os.replace(temp, self.path)


def wait_unmounted(path: str | os.PathLike[str], timeout: float = 10) -> bool:
    """Whether ``path`` stopped being a mountpoint within ``timeout`` seconds."""
    return wait_for(lambda: not is_mounted(path), timeout)


def wait_mounted(path: str | os.PathLike[str], timeout: float = 10) -> bool:
    """Whether ``path`` became a mountpoint within ``timeout`` seconds."""
    return wait_for(lambda: is_mounted(path), timeout)


def force_unmount(path: str | os.PathLike[str]) -> bool:
    """Unmount ``path`` however it takes; True if nothing is mounted there afterwards."""
    where = os.fspath(path)
    escalation = (["fusermount3", "-u"], ["fusermount3", "-u", "-z"], ["umount", "-l"])
    for cmd in escalation:
        if not is_mounted(where):
            return True
        _quietly([*cmd, where])
    return not is_mounted(where)


def _process_alive(pid: int) -> bool:
    """Whether any thread of ``pid`` is still running (not exited, not a zombie).

    Each thread counts: a killed daemon's main thread turns zombie before its other threads
    finish exiting, and its /dev/fuse (hence its mount) lives until the last one has. Zombies
    count as gone: PID 1 here may never reap the daemons it inherits.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
            return True
    return False


def daemon_pids(mountpoint: str | os.PathLike[str]) -> list[int]:
    """Live processes serving ``mountpoint``: cmdline has ``--foreground`` and its path."""
    want = {os.fsencode(os.path.abspath(mountpoint)), os.fsencode(_canonical(mountpoint))}
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--foreground" in args and want & set(args) and _process_alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


def daemon_pid(mountpoint: str | os.PathLike[str]) -> int:
    """The one daemon process serving ``mountpoint``."""
    pids = daemon_pids(mountpoint)
    assert len(pids) == 1, f"expected one daemon for {mountpoint}, found {pids}"
    return pids[0]


def read_bytes_of(pid: int) -> int:
    """Bytes a process has read with read/pread so far (its ``rchar``): what a daemon fetched
    from the store, whatever the page cache did."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no rchar")


def is_dead_mount(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a dead FUSE mount: its daemon is gone, requests fail with ENOTCONN
    (or ECONNABORTED while the kernel is still tearing the connection down).

    Asks with statvfs: stat may be answered from the kernel's attribute cache, dead or not.
    """
    try:
        os.statvfs(path)
    except OSError as e:
        return e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def wait_exited(pid: int, timeout: float = EXIT_TIMEOUT) -> bool:
    """Whether process ``pid`` exited (or is a zombie) within ``timeout`` seconds."""
    return wait_for(lambda: not _process_alive(pid), timeout)


def _stop_daemons(mountpoint: Path) -> None:
    """After unmounting: daemons should exit by themselves; kill any that do not."""
    for pid in daemon_pids(mountpoint):
        if not wait_exited(pid):
            warnings.warn(f"daemon {pid} for {mountpoint} did not exit after unmount; killing it",
                          stacklevel=1)
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def mounted(
    source: str | os.PathLike[str], mountpoint: str | os.PathLike[str], *extra_args: str,
    timeout: float = 30,
) -> Iterator[Path]:
    """``zarrfuse mount SOURCE MOUNTPOINT *extra_args`` in the background; yields MOUNTPOINT.

    The mountpoint directory is created if missing. Fails the test with zarrfuse's stderr if
    the mount does not come up within ``timeout`` seconds. Always unmounts on exit, and stops
    the daemon, even if the test failed or the daemon is stuck or dead.
    """
    mnt = Path(mountpoint).absolute()
    mnt.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):  # mkdir(exist_ok=True) would stat it, failing on a dead mount
        mnt.mkdir()
    try:
        result = run_with_timeout(
            [*ZARRFUSE, "mount", os.fspath(source), str(mnt), *extra_args], timeout, check=False
        )
        assert result.returncode == 0, (
            f"zarrfuse mount exited with {result.returncode}; stderr:\n{result.stderr}"
        )
        assert is_mounted(mnt), f"zarrfuse mount returned 0 but nothing is mounted at {mnt}"
        yield mnt
    finally:
        if not force_unmount(mnt):
            warnings.warn(f"could not unmount {mnt}", stacklevel=1)
        _stop_daemons(mnt)


@pytest.fixture
def mountpoint(tmp_path: Path) -> Iterator[Path]:
    """A fresh empty directory to mount on; unmounted at teardown if a test left a mount."""
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    if is_mounted(path):
        force_unmount(path)
        _stop_daemons(path)
