"""Reporting on a live mount: sd_notify readiness and stopping, and ``zarrfuse stats`` over
the control socket. Every mount is real, unmounted in teardown, and times out rather than
hangs."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.operating import chunk_files, foreground, mount_test, stats
from tests.mounting import (
    ZARRFUSE,
    daemon_pid,
    is_mounted,
    mounted,
    run_with_timeout,
    wait_exited,
    wait_for,
    wait_unmounted,
)
from zarrfuse.daemon import control, notify

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


@pytest.mark.expect_log(r"cannot notify systemd", r"not notifying systemd")
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
    assert wait_for(lambda: not socket_path.exists(), 10), "control socket left after unmount"
    result = run_with_timeout([*ZARRFUSE, "stats", mountpoint], 20, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == f"zarrfuse: {mountpoint} is not mounted"


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


@pytest.mark.parametrize(("watching", "said"), [
    (None, ""), (True, ", following the store"), (False, ", not following the store"),
])
def test_stats_say_whether_the_store_watch_runs(watching, said):
    document = {"mountpoint": "/mnt/a", "kind": "array", "source": "/data/a.zarr",
                "read_only": False, "pid": 7, "uptime_s": 5, "counters": {},
                "watching": watching}
    first = control.format_stats(document).splitlines()[0]
    assert first == f"/mnt/a: array /data/a.zarr (writable), pid 7, up 0:00:05{said}"


def test_socket_dirs_refuse_runtime_dirs_of_others(tmp_path):
    other = tmp_path / "runtime"
    other.mkdir()
    os.chown(other, 12345, 12345)
    assert control.socket_dirs(1000, {"XDG_RUNTIME_DIR": str(other)}) == ["/tmp/zarrfuse-1000"]
    assert control.socket_dirs(12345, {"XDG_RUNTIME_DIR": str(other)}) == [
        f"{other}/zarrfuse", "/tmp/zarrfuse-12345",
    ]
    assert control.socket_dirs(0, {}) == ["/run/zarrfuse"]
