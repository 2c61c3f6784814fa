"""Operating zarrfuse: systemd readiness, stats, ownership and modes, non-root mounts, logs,
``zarrfuse verify`` and its progress bar, and the Dockerfile's command.

Every mount here is real, every test that mounts unmounts in teardown (also on failure) and
times out rather than hangs. The mount helper and fstab are in test_mount_helper.py, the
systemd unit in test_systemd_unit.py.
"""

from __future__ import annotations

import json
import os
import pty
import pwd
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec

import zarrfuse
from tests.mounting import (
    ZARRFUSE,
    daemon_pid,
    daemon_pids,
    force_unmount,
    is_mounted,
    mounted,
    requires_fuse,
    run_with_timeout,
    wait_exited,
    wait_mounted,
    wait_unmounted,
)
from zarrfuse.cli import control, notify
from zarrfuse.progress import Progress

REPO = Path(__file__).resolve().parents[2]


def mount_test(test: Callable) -> Callable:
    """Needs FUSE, is marked ``fuse``, and times out rather than hang."""
    return requires_fuse(pytest.mark.fuse(pytest.mark.timeout(90)(test)))


def chunk_files(mnt: Path) -> list[Path]:
    """Every chunk file of a mounted array, sorted."""
    return sorted(p for p in mnt.rglob("*") if p.is_file() and p.name != "zarr.json")


@contextmanager
def foreground(source: Path, mnt: Path, *args: str, env: dict[str, str] | None = None):
    """``zarrfuse mount --foreground``; yields the process; always unmounted and stopped."""
    proc = subprocess.Popen(
        [*ZARRFUSE, "mount", str(source), str(mnt), "--foreground", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        yield proc
    finally:
        force_unmount(mnt)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# --- sd_notify ------------------------------------------------------------------------------


class NotifyListener:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock = sock
        self.address = address  # as NOTIFY_SOCKET spells it

    def receive(self, timeout: float = 30) -> dict[str, str]:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except TimeoutError:
            pytest.fail(f"no sd_notify message within {timeout} s")
        return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)

    def nothing_more(self) -> bool:
        return not select.select([self.sock], [], [], 0.5)[0]


@pytest.fixture(params=["abstract", "path"])
def notify_listener(request, tmp_path) -> Iterator[NotifyListener]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "abstract":
        name = f"zarrfuse-test-{os.getpid()}-{time.monotonic_ns()}"
        sock.bind("\0" + name)
        address = "@" + name
    else:
        address = str(tmp_path / "notify.sock")
        sock.bind(address)
    with sock:
        yield NotifyListener(sock, address)


def test_notify_speaks_the_datagram_protocol(notify_listener):
    env = {"NOTIFY_SOCKET": notify_listener.address}
    assert notify.notify("READY=1\nSTATUS=hello", env)
    assert notify_listener.receive(5) == {"READY": "1", "STATUS": "hello"}
    notifier = notify.Notifier(env)
    notifier.stopping("bye")
    notifier.ready("too late")  # READY after STOPPING is never sent
    notifier.stopping("again")  # once only
    assert notify_listener.receive(5) == {"STOPPING": "1", "STATUS": "bye"}
    assert notify_listener.nothing_more()


def test_notify_without_socket_or_with_a_dead_one_does_nothing(tmp_path):
    assert not notify.notify("READY=1", {})
    assert not notify.notify("READY=1", {"NOTIFY_SOCKET": "vsock:2:1234"})
    assert not notify.notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})


@mount_test
def test_sd_notify_ready_when_live_then_stopping_in_foreground(
    notify_listener, array_v3, mountpoint
):
    env = {"NOTIFY_SOCKET": notify_listener.address}
    with foreground(array_v3, mountpoint, env=env) as proc:
        ready = notify_listener.receive()
        assert ready["READY"] == "1" and ready["MAINPID"] == str(proc.pid)
        # READY=1 is sent after a stat through the kernel: the mount is live by now.
        assert is_mounted(mountpoint)
        assert "zarr.json" in run_with_timeout(["ls", mountpoint], 10).stdout.split()
        assert notify_listener.nothing_more()
        proc.send_signal(signal.SIGTERM)
        stopping = notify_listener.receive()
        assert stopping["STOPPING"] == "1" and "SIGTERM" in stopping["STATUS"]
        assert proc.wait(20) == 0
        assert wait_unmounted(mountpoint)
        assert notify_listener.nothing_more()


@mount_test
def test_sd_notify_from_the_background_daemon_on_external_unmount(
    notify_listener, array_v3, mountpoint, monkeypatch
):
    monkeypatch.setenv("NOTIFY_SOCKET", notify_listener.address)
    with mounted(array_v3, mountpoint):
        ready = notify_listener.receive()
        assert ready["READY"] == "1" and ready["MAINPID"] == str(daemon_pid(mountpoint))
        run_with_timeout([*ZARRFUSE, "umount", mountpoint], 20)
        assert notify_listener.receive()["STOPPING"] == "1"


# --- zarrfuse stats -------------------------------------------------------------------------


def stats(mnt: Path) -> dict:
    return json.loads(run_with_timeout([*ZARRFUSE, "stats", "--json", mnt], 20).stdout)


def delta(after: dict, before: dict, *path: str) -> int:
    def get(d: dict) -> int:
        for key in path:
            d = d.get(key, {})
        return d or 0

    return get(after["counters"]) - get(before["counters"])


@mount_test
def test_stats_count_a_known_workload(array_v3, mountpoint):
    with mounted(array_v3, mountpoint) as mnt:
        first = stats(mnt)
        assert first["mountpoint"] == str(mnt) and first["pid"] == daemon_pid(mnt)
        assert first["source"] == str(array_v3) and first["kind"] == "array"

        files = chunk_files(mnt)
        assert len(files) == 4
        data = files[0].read_bytes()  # N bytes through the mount
        assert not (mnt / "no-such-file").exists()  # a lookup answered "no such name"
        with open(files[1], "r+b") as f:  # rewrite a chunk: M bytes written, one commit
            f.write(files[1].read_bytes())
        written = files[1].stat().st_size
        after = stats(mnt)

        assert delta(after, first, "bytes_read") >= len(data) > 0
        assert delta(after, first, "requests", "read") >= 1
        assert delta(after, first, "bytes_written") >= written > 0
        assert delta(after, first, "requests", "write") >= 1
        assert delta(after, first, "cache", "negative_entry") >= 1  # absence, kernel-cacheable
        assert delta(after, first, "store_bytes_written") >= written
        assert delta(after, first, "store_requests", "write") >= 1

        table = run_with_timeout([*ZARRFUSE, "stats", mnt], 20).stdout
        assert table.startswith(f"{mnt}: array {array_v3} (writable), pid ")
        assert re.search(r"^  negative_entry +\d+$", table, re.M), table
        assert re.search(r"^  write +\d+\.\d{3}$", table, re.M), table  # mean ms per write
        assert re.search(r"^  read through the mount +\d", table, re.M), table

        assert control.mount_owner(str(mnt)) == os.getuid()
        socket_path = Path(control.socket_dirs()[0]) / control.socket_name(str(mnt))
        assert socket_path.is_socket()
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    assert wait_unmounted(mountpoint)
    assert wait_for(lambda: not socket_path.exists()), "control socket left after unmount"
    result = run_with_timeout([*ZARRFUSE, "stats", mountpoint], 20, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == f"zarrfuse: {mountpoint} is not mounted"


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@mount_test
def test_stats_after_the_daemon_was_killed_says_so_and_a_new_mount_takes_over(
    array_v3, mountpoint
):
    with mounted(array_v3, mountpoint):
        pid = daemon_pid(mountpoint)
        os.kill(pid, signal.SIGKILL)
        assert wait_exited(pid)
        result = run_with_timeout([*ZARRFUSE, "stats", mountpoint], 20, check=False)
        assert result.returncode == 1 and "nobody listens" in result.stderr
        with mounted(array_v3, mountpoint):  # the new daemon replaces the stale socket
            assert stats(mountpoint)["pid"] == daemon_pid(mountpoint)


@mount_test
def test_stats_of_a_mountpoint_with_blanks_in_its_name(array_v3, tmp_path):
    with mounted(array_v3, tmp_path / "mount point\twith tab") as mnt:
        assert control.mount_owner(str(mnt)) == os.getuid()  # mountinfo escapes: \040, \011
        assert stats(mnt)["mountpoint"] == str(mnt)


@mount_test
def test_stats_into_a_closed_pipe_is_quiet(array_v3, mountpoint):
    """``zarrfuse stats | head`` must not end with a complaint about a broken pipe."""
    with mounted(array_v3, mountpoint) as mnt:
        child = subprocess.Popen([*ZARRFUSE, "stats", "--json", mnt], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        child.stdout.close()  # no reader left: the child's first write fails with EPIPE
        _, err = child.communicate(timeout=20)
        assert child.returncode == 141
        assert err == b""


def test_stats_of_a_directory_that_is_not_a_mount(tmp_path):
    result = run_with_timeout([*ZARRFUSE, "stats", tmp_path], 20, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == f"zarrfuse: {tmp_path} is not mounted"


def test_stats_table_format():
    document = {
        "mountpoint": "/mnt/a", "kind": "group", "source": "s3://b/x", "read_only": True,
        "pid": 42, "uptime_s": 3725.2,
        "counters": {
            "requests": {"read": 3, "lookup": 10}, "errors": {}, "store_requests": {"read": 2},
            "request_seconds": {"read": 0.006, "lookup": 0.002}, "cache": {},
            "bytes_read": 3 * 2**20, "bytes_written": 0, "store_bytes_read": 100,
            "store_bytes_written": 0,
        },
    }
    lines = control.format_stats(document).splitlines()
    assert lines[0] == "/mnt/a: group s3://b/x (read-only), pid 42, up 1:02:05"
    assert lines[1].split() == ["requests", "13"]
    assert lines[2].split() == ["lookup", "10"]  # most frequent first
    timing = lines.index("mean time per request (ms)")
    assert [line.split() for line in lines[timing + 1 : timing + 3]] == [
        ["read", "2.000"], ["lookup", "0.200"],  # slowest in total first
    ]
    assert "3.0 MiB (3145728)" in control.format_stats(document)


def test_socket_dirs_refuse_runtime_dirs_of_others(tmp_path):
    other = tmp_path / "runtime"
    other.mkdir()
    os.chown(other, 12345, 12345)
    assert control.socket_dirs(1000, {"XDG_RUNTIME_DIR": str(other)}) == ["/tmp/zarrfuse-1000"]
    assert control.socket_dirs(12345, {"XDG_RUNTIME_DIR": str(other)}) == [
        f"{other}/zarrfuse", "/tmp/zarrfuse-12345",
    ]
    assert control.socket_dirs(0, {}) == ["/run/zarrfuse"]


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


def user_zarrfuse(user: pwd.struct_passwd) -> list[str]:
    """How ``user`` runs this checkout's zarrfuse: this Python if it can execute it, else the
    system Python of the same version with the venv's packages on PYTHONPATH (the test venv may
    live under /root, which other users cannot enter)."""
    if as_user(user, sys.executable, "-c", "import zarrfuse").returncode == 0:
        return [sys.executable, "-m", "zarrfuse"]
    system = "/usr/bin/python3"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    probe = as_user(user, system, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
    if probe.returncode != 0 or probe.stdout.strip() != version:
        pytest.skip(f"no Python {version} that {user.pw_name} can run zarrfuse with")
    site = next(p for p in sys.path if p.endswith("site-packages"))
    command = ["env", f"PYTHONPATH={REPO}:{site}", system, "-m", "zarrfuse"]
    if as_user(user, *command, "--version").returncode != 0:
        pytest.skip(f"{user.pw_name} cannot import zarrfuse from {REPO} and {site}")
    return command


@contextmanager
def fuse_device_mode(mode: int) -> Iterator[None]:
    """/dev/fuse with ``mode`` for the test (as udev would set it), restored afterwards."""
    old = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", mode)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", old)


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(120)
def test_non_root_user_mounts_and_unmounts(other_user, shared_dir, array_v3):
    """Through the setuid fusermount3, on a directory the user owns, as on any Debian host.

    libfuse and fusermount3 both open /dev/fuse with the user's own rights. Debian's udev makes
    it 0666; where it is 0600 (no udev, as in some VMs and containers) no user can mount, and
    zarrfuse says so in one line. Both cases are checked by setting the mode for the test.
    """
    zarrfuse = user_zarrfuse(other_user)
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


# --- logs -----------------------------------------------------------------------------------

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) (\S+): (.*)$")


def log_messages(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        match = LOG_LINE.match(line)
        if match:
            out.append(f"{match[1]} {match[3]}")
    return out


@mount_test
def test_log_has_one_line_per_mount_and_unmount_with_the_reason(array_v3, tmp_path, mountpoint):
    log = tmp_path / "zarrfuse.log"
    with mounted(array_v3, mountpoint, "--log-file", str(log)):
        pass  # unmounted from outside by mounted()'s teardown
    with foreground(array_v3, mountpoint, "--log-file", str(log), "--read-only") as proc:
        assert wait_mounted(mountpoint, 30)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    assert log_messages(log) == [
        f"INFO mounted array {array_v3} at {mountpoint} (writable)",
        f"INFO unmounted {mountpoint} (unmounted from outside (umount or fusermount3 -u))",
        f"INFO mounted array {array_v3} at {mountpoint} (read-only)",
        "INFO received SIGTERM, unmounting",
        f"INFO unmounted {mountpoint} (received SIGTERM)",
    ]


def test_foreground_failure_is_logged_with_the_reason(tmp_path, mountpoint):
    log = tmp_path / "zarrfuse.log"
    missing = tmp_path / "missing"
    result = run_with_timeout(
        [*ZARRFUSE, "mount", missing, mountpoint, "--foreground", "--log-file", log], 30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("zarrfuse: ")
    (message,) = log_messages(log)
    assert message.startswith("ERROR mount failed: ") and str(missing) in message


# --- zarrfuse verify ------------------------------------------------------------------------


def verify(*args, **kwargs) -> subprocess.CompletedProcess[str]:
    return run_with_timeout([*ZARRFUSE, "verify", *args], 120, check=False, **kwargs)


def test_verify_a_good_array(array_v3):
    result = verify(array_v3)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "verified 4 chunks of 1 array: 0 failed\n"
    assert result.stderr == ""  # not a terminal: no progress bar


def test_verify_names_a_corrupted_chunk(array_v3):
    (array_v3 / "c" / "1" / "0").write_bytes(b"not zstd at all")
    result = verify(array_v3)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAILED c/1/0: ")
    assert lines[1:] == ["verified 4 chunks of 1 array: 1 failed"]


def test_verify_a_group_with_sharded_and_concat_parts_arrays(tmp_path):
    root = tmp_path / "group"
    group = zarr.open_group(root, mode="w")
    group.create_array("plain", shape=(10,), chunks=(3,), dtype="i4")[:] = np.arange(10)
    sharded = group.create_array("sub/sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4),
                                 dtype="u2")
    sharded[:] = 7
    parts = zarrfuse.create_array(
        root / "parts", shape=(6,), chunks=(2,), dtype="u1", compressors=[Crc32cCodec()],
        storage_transformers=[{"name": "concat-parts", "configuration": {"parts": [
            {"key_suffix": ""}, {"key_suffix": ".crc", "size": 4}]}}],
    )
    parts[:] = np.arange(6, dtype="u1")
    (root / "notes").mkdir()  # not a Zarr node: ignored
    (root / "plain" / "c" / "3.12345.partial").write_bytes(b"junk")  # not a chunk key

    good = verify(root)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout == "verified 11 chunks of 3 arrays: 0 failed\n"  # 4 + 4 shards + 3

    shard = root / "sub" / "sharded" / "c" / "1" / "0"
    shard.write_bytes(shard.read_bytes()[:-3] + b"xyz")  # breaks the shard index checksum
    (root / "parts" / "c" / "2.crc").unlink()  # a chunk with a part missing
    bad = verify(root)
    assert bad.returncode == 1
    failed = [line.split(":")[0] for line in bad.stdout.splitlines()[:-1]]
    assert failed == ["FAILED parts/c/2", "FAILED sub/sharded/c/1/0"]
    assert bad.stdout.splitlines()[-1] == "verified 11 chunks of 3 arrays: 2 failed"


def test_verify_of_a_missing_source_is_one_line(tmp_path):
    result = verify(tmp_path / "missing")
    assert result.returncode == 1
    assert result.stderr.startswith("zarrfuse: ") and len(result.stderr.splitlines()) == 1


def test_verify_draws_a_progress_bar_on_a_terminal(array_v3):
    (array_v3 / "c" / "0" / "1").write_bytes(b"broken")
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*ZARRFUSE, "verify", str(array_v3)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=terminal, text=True,
        )
        os.close(terminal)
        out, _ = proc.communicate(timeout=120)
        drawn = b""
        while select.select([controller], [], [], 0.2)[0]:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
    assert proc.returncode == 1
    text = drawn.decode()
    assert "\r" in text and "verifying: 100% |" in text and "4/4 chunk" in text
    assert text.endswith("\r\x1b[K")  # erased when done
    assert out.splitlines()[0].startswith("FAILED c/0/1: ")  # results stay on stdout


def test_progress_bar_lines():
    bar = Progress(total=200, description="copying", unit="chunk", enabled=False)
    bar.update(50)
    line = bar.line(80)
    assert line.startswith("copying:  25% |") and " 50/200 chunk [" in line and len(line) <= 80
    unknown = Progress(description="listing", unit="key", enabled=False)
    unknown.update(7)
    assert unknown.line(80).startswith("listing: 7 key [")
    assert len(Progress(total=10, enabled=False).line(20)) < 20


def test_progress_bar_is_silent_off_a_terminal(tmp_path, capsys):
    with open(tmp_path / "err", "w") as stream, Progress(total=3, stream=stream) as bar:
        bar.update(3)
        bar.write("a result")
    assert (tmp_path / "err").read_text() == ""
    assert capsys.readouterr().out == "a result\n"


# --- the Dockerfile -------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, per stage: (INSTRUCTION, arguments), continuations joined."""
    text = (REPO / "Dockerfile").read_text()
    logical = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), " ".join(args.split())))
    return stages


def test_dockerfile_runs_zarrfuse_mount_in_the_foreground():
    final = dict(dockerfile_stages()[-1])
    assert json.loads(final["ENTRYPOINT"]) == ["zarrfuse", "mount", "--foreground"]
    assert json.loads(final["CMD"]) == ["/data", "/mnt/zarr"]
    assert final["STOPSIGNAL"] == "SIGTERM"


def test_dockerfile_copies_what_exists_and_dockerignore_lets_it_through():
    ignore = (REPO / ".dockerignore").read_text().split()
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction == "COPY" and not args.startswith("--from"):
                *sources, _ = args.split()
                for source in sources:
                    assert (REPO / source).exists(), source
                    assert f"!{source.rstrip('/')}/" in ignore or f"!{source}" in ignore, source


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="needs apt-cache")
def test_dockerfile_apt_packages_exist_in_bookworm():
    """The image is Debian 12 (bookworm), as this machine is: its apt knows the packages."""
    assert "bookworm" in dockerfile_stages()[0][0][1]
    packages = []
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction == "RUN" and "apt-get install" in args:
                words = args.split("apt-get install", 1)[1].split("&&")[0].split()
                packages += [w for w in words if not w.startswith("-")]
    assert {"fuse3", "libfuse3-dev", "gcc", "pkg-config"} <= set(packages)
    for package in packages:
        result = run_with_timeout(["apt-cache", "show", "--no-all-versions", package], 30,
                                  check=False)
        assert result.returncode == 0 and f"Package: {package}" in result.stdout, package


@mount_test
def test_dockerfile_entrypoint_serves_until_sigterm(array_v3, tmp_path, mountpoint):
    """What the container runs, run here: ENTRYPOINT + arguments, stopped as docker stop does."""
    entrypoint = json.loads(dict(dockerfile_stages()[-1])["ENTRYPOINT"])
    assert entrypoint[0] == "zarrfuse"
    bin_dir = Path(sys.executable).parent  # the venv's console script stands in for the image's
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [*entrypoint, str(array_v3), str(mountpoint), "--read-only"], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert wait_mounted(mountpoint, 30), "the entrypoint did not mount"
        assert len(chunk_files(mountpoint)) == 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert wait_unmounted(mountpoint)
    finally:
        force_unmount(mountpoint)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_readme_shows_how_to_run_the_container():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Operating zarrfuse") : readme.index("## Layout")]
    for fragment in ("--device /dev/fuse", "--cap-add SYS_ADMIN", ":rshared", "docker run"):
        assert fragment in section, fragment
