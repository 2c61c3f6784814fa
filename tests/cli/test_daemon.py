"""The mount lifecycle through the ``zarrfuse`` command: background and foreground mounts,
signals, logs, dead mounts, and a daemon that crashes or hangs once its mount is live. Every
mount is real, unmounted in teardown, and times out rather than hangs."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zarr

from tests.cli.commandline import (
    assert_left_nothing,
    assert_one_line_error,
    mount_test,
    zarrfuse,
)
from tests.deadlines import answered
from tests.mounting import (
    ZARRFUSE,
    daemon_pid,
    daemon_pids,
    force_unmount,
    is_dead_mount,
    is_mounted,
    mounted,
    run_with_timeout,
    wait_exited,
    wait_for,
    wait_mounted,
    wait_unmounted,
)
from zarrfuse.cli import daemon
from zarrfuse.errors import MountError
from zarrfuse.fuse.config import MountConfig


def test_the_daemon_keeps_one_blas_thread_unless_told_otherwise():
    assert daemon.daemon_environment({"HOME": "/root"}) == {
        "HOME": "/root", "OPENBLAS_NUM_THREADS": "1"}
    assert daemon.daemon_environment({"OPENBLAS_NUM_THREADS": "4"}) == {
        "OPENBLAS_NUM_THREADS": "4"}


# --- the mount lifecycle (needs zarrfuse.fuse.mount.serve) ----------------------------------------


@pytest.mark.parametrize("form", ["absolute", "relative", "file-url"])
@mount_test
def test_mount_ls_and_umount(form, array_v3, tmp_path, mountpoint):
    source, target, cwd = str(array_v3), str(mountpoint), None
    if form == "relative":  # the daemon runs in /: the CLI must make both absolute first
        source, target, cwd = "arr", "mnt", tmp_path
    if form == "file-url":
        source = array_v3.as_uri()
    result = zarrfuse("mount", source, target, cwd=cwd)
    try:
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert is_mounted(mountpoint)
        pid = daemon_pid(mountpoint)
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"OPENBLAS_NUM_THREADS=1" in environ  # no BLAS thread spinning at its start
        listing = run_with_timeout(["ls", mountpoint], 10)
        assert "zarr.json" in listing.stdout.split()
        result = zarrfuse("umount", mountpoint)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert not is_mounted(mountpoint)
        assert wait_exited(pid, 10), "the daemon did not exit after umount"
    finally:
        force_unmount(mountpoint)


@mount_test
def test_mount_zip_store(tmp_path, mountpoint):
    zipped = zarr.storage.ZipStore(tmp_path / "arr.zip", mode="w")
    zarr.create_array(zipped, shape=(4,), chunks=(2,), dtype="u1")[:] = 1
    zipped.close()
    with mounted(tmp_path / "arr.zip", mountpoint):
        assert "zarr.json" in os.listdir(mountpoint)


@mount_test
def test_sigterm_to_the_daemon_unmounts(array_v3, mountpoint):
    with mounted(array_v3, mountpoint):
        pid = daemon_pid(mountpoint)
        os.kill(pid, signal.SIGTERM)
        assert wait_unmounted(mountpoint, 20), "SIGTERM did not unmount"
        assert wait_exited(pid, 10), "the daemon did not exit after SIGTERM"


@contextmanager
def killed_daemon(source: Path, mnt: Path, *options: str) -> Iterator[None]:
    """Mount, then SIGKILL the daemon: a dead mount remains. Cleaned up whatever happens."""
    with mounted(source, mnt, *options):
        os.listdir(mnt)  # fill the kernel's caches, as real use would
        pid = daemon_pid(mnt)
        os.kill(pid, signal.SIGKILL)
        assert wait_exited(pid, 10)
        # The kernel drops the connection once the last thread has gone: wait for that.
        assert wait_for(lambda: is_dead_mount(mnt), 10), "a killed daemon should leave a dead mount"
        assert is_mounted(mnt)
        yield


@mount_test
def test_umount_cleans_the_dead_mount_of_a_killed_daemon(array_v3, mountpoint):
    with killed_daemon(array_v3, mountpoint):
        result = zarrfuse("umount", mountpoint)
        assert result.returncode == 0, result.stderr
        assert not is_mounted(mountpoint)
        assert os.listdir(mountpoint) == []


@pytest.mark.parametrize("options", [(), ("--read-only",)], ids=["writable", "read-only"])
@mount_test
def test_dead_mount_does_not_stop_a_new_mount(options, array_v3, mountpoint):
    """Read-only mounts matter: the kernel caches their attributes, so stat cannot tell."""
    with killed_daemon(array_v3, mountpoint, *options):
        with mounted(array_v3, mountpoint, *options):
            assert "zarr.json" in run_with_timeout(["ls", mountpoint], 10).stdout.split()
            assert len(daemon_pids(mountpoint)) == 1
        assert not is_mounted(mountpoint)


@mount_test
def test_mounting_twice_is_refused(array_v3, mountpoint):
    with mounted(array_v3, mountpoint):
        pid = daemon_pid(mountpoint)
        assert_one_line_error(zarrfuse("mount", array_v3, mountpoint), "already mounted")
        assert daemon_pids(mountpoint) == [pid]
        assert "zarr.json" in os.listdir(mountpoint)


@mount_test
def test_foreground_serves_until_unmounted(array_v3, tmp_path, mountpoint):
    log = tmp_path / "fg.log"
    cmd = [*ZARRFUSE, "mount", str(array_v3), str(mountpoint), "--foreground", f"--log-file={log}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_mounted(mountpoint, 30), "the foreground mount did not come up"
        assert daemon_pids(mountpoint) == [proc.pid]
        assert "zarr.json" in run_with_timeout(["ls", mountpoint], 10).stdout.split()
        assert zarrfuse("umount", mountpoint).returncode == 0
        assert proc.wait(20) == 0
        assert proc.stderr.read() == ""  # everything went to --log-file
    finally:
        force_unmount(mountpoint)
        proc.kill()
        proc.wait(10)
    assert " INFO " in log.read_text()


@mount_test
def test_log_file_receives_the_daemon_log(array_v3, tmp_path, mountpoint):
    log = tmp_path / "logs" / "zarrfuse.log"
    log.parent.mkdir()
    with mounted(array_v3, mountpoint, "--log-file", str(log)):
        os.listdir(mountpoint)
    assert wait_unmounted(mountpoint)
    lines = log.read_text().splitlines()
    assert any(" INFO " in line for line in lines), lines
    assert oct(log.stat().st_mode & 0o777) == "0o600"  # a log names files and stores


@mount_test
def test_daemon_failing_before_ready_is_one_line_and_leaves_nothing(array_v3, tmp_path, mountpoint):
    """The source is fine, so the parent spawns the daemon; the kernel refuses the option."""
    log = tmp_path / "daemon.log"
    result = zarrfuse("mount", array_v3, mountpoint, "-o", "no_such_fuse_option", "--log-file", log)
    assert_one_line_error(result)
    assert_left_nothing(mountpoint)
    assert "no_such_fuse_option" in log.read_text()  # libfuse's own complaint


# --- a daemon that crashes or hangs once its mount is live ---------------------------------

# Fault injection through Python's startup hook, active only in the spawned daemon (the one
# process with --ready-fd): replaces the "ok" report with a crash, or with a hang that also
# blocks the trio loop, so the mount is live but stuck.
DAEMON_HOOK = """
import os, sys
if "--ready-fd" in sys.argv and os.environ.get("ZARRFUSE_TEST_DAEMON"):
    import signal, time
    import zarrfuse.cli.daemon

    def ready(self):
        if os.environ["ZARRFUSE_TEST_DAEMON"] == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(3600)

    zarrfuse.cli.daemon.ReadyPipe.ready = ready
"""


@pytest.fixture
def faulty_daemon(tmp_path, monkeypatch) -> Callable[[str], None]:
    """Makes daemons spawned from here on ``crash`` or ``hang`` when their mount is live."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(DAEMON_HOOK)
    monkeypatch.setenv("PYTHONPATH", str(hook))
    return lambda behaviour: monkeypatch.setenv("ZARRFUSE_TEST_DAEMON", behaviour)


@mount_test
def test_daemon_crashing_after_mounting_leaves_nothing(faulty_daemon, array_v3, mountpoint):
    faulty_daemon("crash")
    result = zarrfuse("mount", array_v3, mountpoint)
    assert_one_line_error(result, "was killed by SIGKILL before the mount was live")
    assert_left_nothing(mountpoint)


@mount_test
def test_daemon_not_reporting_in_time_is_stopped_and_unmounted(faulty_daemon, array_v3, mountpoint):
    faulty_daemon("hang")
    config = MountConfig(source=str(array_v3), mountpoint=str(mountpoint))
    # The daemon sleeps an hour: only the 3 s handed to the parent ends the wait, and its
    # answer says so; the hang guard, far above, fails a parent that would wait the hour.
    with pytest.raises(MountError, match="did not report a live mount within 3 s"):
        answered(lambda: daemon.mount_in_background(config, timeout=3), "a background mount")
    assert_left_nothing(mountpoint)


def _written_and_open(tmp_path: Path, mountpoint: Path) -> tuple[Path, Path, int, int]:
    """A raw 8-byte chunk of ones, mounted with a log file; the chunk opened through the mount
    and written with fives, not closed: (store, log, daemon pid, descriptor)."""
    from zarr.codecs import BytesCodec  # noqa: PLC0415  (only these tests write raw chunks)

    store, log = tmp_path / "a", tmp_path / "daemon.log"
    zarr.create_array(store, shape=(8,), chunks=(8,), dtype="u1", serializer=BytesCodec(),
                      compressors=None)[:] = 1
    result = run_with_timeout([*ZARRFUSE, "mount", store, mountpoint, "--log-file", log])
    assert result.returncode == 0
    pid = daemon_pid(mountpoint)  # read from /proc: no child inherits the fd below
    fd = os.open(mountpoint / "c" / "0" / "000", os.O_WRONLY)
    os.pwrite(fd, bytes([5]) * 8, 0)
    return store, log, pid, fd


def _stopping(log: Path, mountpoint: Path) -> bool:
    """The stop is under way (waiting for the writer: the log says so), or over."""
    return ("chunk file(s) open for writing to be closed" in log.read_text()
            or not daemon_pids(mountpoint))


@mount_test
@pytest.mark.parametrize("stop", ["SIGTERM", "umount"])
def test_a_writer_that_closes_while_the_mount_stops_is_told_its_chunk_is_stored(
        tmp_path, mountpoint, stop):
    """Issue 52 point 7: a stop (systemd's SIGTERM, `zarrfuse umount`) with a chunk open for
    writing used to store it and unmount, so the writer's close() then failed (ENOTCONN) for a
    chunk that was stored. The stop now serves on until the writer closes: close() succeeds,
    and the chunk is stored."""
    store, log, pid, fd = _written_and_open(tmp_path, mountpoint)
    try:
        if stop == "SIGTERM":
            os.kill(pid, signal.SIGTERM)
            assert wait_for(lambda: _stopping(log, mountpoint), 20), log.read_text()
        else:  # busy: detached lazily, its open files served until closed
            run_with_timeout([*ZARRFUSE, "umount", mountpoint])
    finally:
        os.close(fd)  # the assertion: no error
    assert wait_exited(pid), "the daemon did not exit once the writer closed"
    assert zarr.open_array(store, mode="r")[:].tolist() == [5] * 8
    assert "not stored" not in log.read_text()


@mount_test
@pytest.mark.parametrize("end", ["second SIGTERM", "wait runs out"])
def test_a_writer_still_open_when_the_mount_stops_is_told_nothing_is_stored(
        tmp_path, mountpoint, end):
    """The other truthful end: a writer still open when the stop ends (a second signal, or
    the wait for it ran out) gets an error from close(), and its chunk is not stored."""
    store, log, pid, fd = _written_and_open(tmp_path, mountpoint)
    try:
        os.kill(pid, signal.SIGTERM)
        assert wait_for(lambda: _stopping(log, mountpoint), 20), log.read_text()
        if end == "second SIGTERM":
            os.kill(pid, signal.SIGTERM)
        assert wait_exited(pid, 30), "the daemon did not stop"
    finally:
        with pytest.raises(OSError) as closing:
            os.close(fd)
    assert closing.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    assert zarr.open_array(store, mode="r")[:].tolist() == [1] * 8
    assert "was still open for writing when the mount stopped: its writes are not stored" in (
        log.read_text())
