"""systemd/zarrfuse@.service: systemd accepts it, it keeps the mount visible to the host, and
zarrfuse works inside its sandbox.

There is no running systemd here (PID 1 is not systemd), so the unit is checked three ways:
``systemd-analyze verify`` (systemd's own parser, with the ExecStart binary linked into
/usr/local/bin for the test); its options against the list of options that make systemd
create a private mount namespace (which would hide the mount from the host); and its
ExecStart/ExecStopPost run the way systemd would run them: NOTIFY_SOCKET set, the capability
bounding set and no_new_privs applied with setpriv(1), and the unit's SystemCallFilter=
expanded by ``systemd-analyze syscall-filter`` and loaded as a seccomp allow list with
SystemCallErrorNumber= for everything else. Not emulated: DeviceAllow= (a cgroup device
filter) and RestrictAddressFamilies=.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import (
    force_unmount,
    is_dead_mount,
    is_mounted,
    requires_fuse,
    run_with_timeout,
    wait_exited,
    wait_unmounted,
)

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "zarrfuse@.service"
EXEC_PATH = Path("/usr/local/bin/zarrfuse")
SYSTEM_PYTHON = "/usr/bin/python3"

needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)"
)

# Options with which systemd gives a service its own mount namespace (systemd's
# exec_needs_mount_namespace()); a FUSE mount made inside it never reaches the host.
NAMESPACE_OPTIONS = {
    "RootDirectory", "RootImage", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
    "ExecPaths", "NoExecPaths", "BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem",
    "MountImages", "ExtensionImages", "ExtensionDirectories", "MountFlags", "PrivateTmp",
    "PrivateDevices", "PrivateMounts", "PrivateNetwork", "NetworkNamespacePath",
    "PrivateIPC", "IPCNamespacePath", "ProtectSystem", "ProtectHome",
    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectControlGroups", "ProtectProc", "ProcSubset", "LogNamespace", "PrivateUsers",
    "DynamicUser", "MountAPIVFS",
}


def unit_settings(path: Path = UNIT) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values, in order (repeated keys accumulate)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@contextmanager
def exec_path_installed() -> Iterator[None]:
    """/usr/local/bin/zarrfuse for the duration (systemd checks ExecStart= exists)."""
    target = Path(sys.executable).parent / "zarrfuse"
    if os.path.lexists(EXEC_PATH):
        yield  # installed already (or left by an interrupted run): use it
        return
    if os.geteuid() != 0:
        pytest.skip(f"cannot create {EXEC_PATH}")
    EXEC_PATH.symlink_to(target)
    try:
        yield
    finally:
        EXEC_PATH.unlink()


def analyze_verify(unit: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_with_timeout(
        ["systemd-analyze", "verify", "--man=no", unit], 60, check=False, cwd=cwd
    )


@needs_analyze
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    with exec_path_installed():
        result = analyze_verify(UNIT, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr  # not even a warning


@needs_analyze
@pytest.mark.parametrize(
    "edit",
    [("Type=notify", "Type=notifyy"), ("Restart=on-failure", "Restart=sometimes"),
     ("ExecStart=/usr/local/bin/zarrfuse", "ExecStart=/usr/local/bin/no-such-zarrfuse")],
    ids=["bad-type", "bad-restart", "missing-binary"],
)
def test_systemd_analyze_verify_would_catch_a_broken_unit(edit, tmp_path):
    """The check above can fail: the same unit with one mistake does not pass it."""
    broken = tmp_path / "zarrfuse@.service"
    text = UNIT.read_text()
    assert edit[0] in text
    broken.write_text(text.replace(edit[0], edit[1], 1))
    with exec_path_installed():
        result = analyze_verify(broken, tmp_path)
    assert result.returncode != 0 or result.stderr != ""


def test_unit_shape():
    service = unit_settings()["Service"]
    assert service["Type"] == ["notify"] and service["NotifyAccess"] == ["main"]
    assert service["Restart"] == ["on-failure"]
    assert service["ExecStart"] == [
        f"{EXEC_PATH} mount --config /etc/zarrfuse/%i.conf --foreground"
    ]
    assert "/dev/fuse rw" in service["DeviceAllow"]
    assert "CAP_SYS_ADMIN" in service["CapabilityBoundingSet"][0].split()
    assert unit_settings()["Unit"]["ConditionPathExists"] == ["/etc/zarrfuse/%i.conf"]


def test_unit_creates_no_mount_namespace():
    """Any of these would give the service a private mount namespace, and the mount would be
    invisible outside it (mounts in a namespace systemd made slave never propagate back)."""
    used = {key for section in unit_settings().values() for key in section}
    assert used & NAMESPACE_OPTIONS == set()


# --- the unit's commands in its sandbox -----------------------------------------------------


def expand_syscall_groups(names: list[str]) -> set[str]:
    """System call names of SystemCallFilter= entries, groups (``@mount``) expanded."""
    seen: set[str] = set()
    calls: set[str] = set()

    def expand(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        if not name.startswith("@"):
            calls.add(name)
            return
        out = run_with_timeout(["systemd-analyze", "syscall-filter", name], 30).stdout
        for line in out.splitlines()[1:]:
            word = line.strip()
            if word and not word.startswith("#"):
                expand(word)

    for name in names:
        expand(name)
    return calls


def have_seccomp_binding() -> bool:
    if not os.path.exists(SYSTEM_PYTHON) or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import seccomp"], capture_output=True)
    return probe.returncode == 0


needs_sandbox_tools = pytest.mark.skipif(
    not have_seccomp_binding() or shutil.which("systemd-analyze") is None,
    reason="needs setpriv, systemd-analyze and python3-seccomp",
)


@pytest.fixture
def sandbox(tmp_path) -> list[str]:
    """The command prefix that applies the unit's [Service] restrictions, as systemd would."""
    service = unit_settings()["Service"]
    filters = [w for value in service["SystemCallFilter"] for w in value.split()]
    assert not any(f.startswith("~") for f in filters), "an allow list is expected"
    allowed = tmp_path / "syscalls"
    allowed.write_text("\n".join(sorted(expand_syscall_groups(["@default", *filters]))))
    caps = ",".join(
        "+" + c.lower().removeprefix("cap_") for c in service["CapabilityBoundingSet"][0].split()
    )
    prefix = ["setpriv", f"--bounding-set=-all,{caps}"]
    if service.get("NoNewPrivileges") == ["yes"]:
        prefix.append("--no-new-privs")
    errno_name = service["SystemCallErrorNumber"][0]
    seccomp_exec = Path(__file__).resolve().parents[1] / "seccomp_exec.py"
    return [*prefix, SYSTEM_PYTHON, str(seccomp_exec), errno_name, str(allowed), "--"]


def command(key: str, instance: str, config_dir: Path) -> list[str]:
    """A [Service] command line with %i expanded and /etc/zarrfuse/ redirected."""
    (value,) = unit_settings()["Service"][key]
    value = value.lstrip("-")  # "-": failure ignored, by systemd
    value = value.replace("%i", instance).replace("/etc/zarrfuse/", f"{config_dir}/")
    return value.split()


@contextmanager
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(30)
        yield sock, path


def receive(sock: socket.socket) -> dict[str, str]:
    try:
        data = sock.recv(4096).decode()
    except TimeoutError:
        pytest.fail("no sd_notify message within 30 s")
    return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)


@contextmanager
def service(argv: list[str], notify_path: str) -> Iterator[subprocess.Popen[str]]:
    """The main process, stopped (SIGKILL) at the end if it still runs; the caller unmounts."""
    proc = subprocess.Popen(
        argv, env={**os.environ, "NOTIFY_SOCKET": notify_path}, cwd="/",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@requires_fuse
@pytest.mark.fuse
@pytest.mark.timeout(120)
@needs_sandbox_tools
def test_unit_commands_work_in_the_units_sandbox(sandbox, tmp_path, mountpoint):
    source = tmp_path / "arr"
    a = zarr.create_array(source, shape=(4, 6), chunks=(2, 3), dtype="u1")
    a[:] = np.arange(24, dtype="u1").reshape(4, 6)
    config_dir = tmp_path / "etc"
    config_dir.mkdir()
    (config_dir / "test.conf").write_text(f"source = {source}\nmountpoint = {mountpoint}\n")
    start = [*sandbox, *command("ExecStart", "test", config_dir)]
    stop_post = [*sandbox, *command("ExecStopPost", "test", config_dir)]
    stats = [*sandbox, str(EXEC_PATH), "stats", "--json", str(mountpoint)]

    with exec_path_installed(), notify_socket(tmp_path) as (sock, notify_path):
        try:
            # systemctl start: READY=1 once live; reads, a write, stats work; stop is SIGTERM.
            with service(start, notify_path) as proc:
                assert receive(sock)["READY"] == "1"
                chunk = mountpoint / "c/0/000/0/000"
                data = chunk.read_bytes()
                with open(chunk, "r+b") as f:  # a commit through the store
                    f.write(data)
                assert (source / "c/0/0").read_bytes() == data
                assert zarr.open_array(source)[:].tolist() == a[:].tolist()
                counters = json.loads(run_with_timeout(stats, 30).stdout)["counters"]
                assert counters["bytes_written"] >= len(data)
                proc.send_signal(signal.SIGTERM)
                assert receive(sock)["STOPPING"] == "1"
                assert proc.wait(20) == 0, proc.stderr.read()
                assert wait_unmounted(mountpoint)
            done = run_with_timeout(stop_post, 30)  # after a clean stop: nothing to do
            assert done.stdout == done.stderr == ""

            # A crash (SIGKILL) leaves a dead mount; Restart=on-failure starts again over it,
            # and after the last stop ExecStopPost detaches whatever is left.
            with service(start, notify_path) as proc:
                assert receive(sock)["READY"] == "1"
                proc.kill()
                assert wait_exited(proc.pid)
            assert is_mounted(mountpoint) and is_dead_mount(mountpoint)
            with service(start, notify_path) as proc:
                assert receive(sock)["READY"] == "1"
                assert "zarr.json" in os.listdir(mountpoint)
                proc.kill()
                assert wait_exited(proc.pid)
            assert is_mounted(mountpoint)
            run_with_timeout(stop_post, 30)
            assert not is_mounted(mountpoint)
        finally:
            force_unmount(mountpoint)
