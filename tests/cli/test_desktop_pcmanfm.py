"""The right-click action on a real desktop (issue 33 point 1): under Xvfb, the command line
of pcmanfm's "Mount as images" action mounts a Zarr folder and pcmanfm, the folder handler
of this desktop, opens the mount in a window named after it and lists its files; the mount
is opened in the file manager the action came from; a failure is also a desktop
notification."""

from __future__ import annotations

import configparser
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, run_with_timeout, wait_for
from zarrfuse.cli.desktop import _command as desktop_command
from zarrfuse.cli.desktop import calling_file_manager

needs_desktop = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("Xvfb", "pcmanfm", "xdotool", "xdg-open")),
    reason="needs Xvfb, pcmanfm, xdotool and xdg-open (scripts/dev installs them)")
needs_xvfb = pytest.mark.skipif(not shutil.which("Xvfb"), reason="needs Xvfb (scripts/dev)")
SYSTEM_PYTHON = "/usr/bin/python3"
"""The system's Python, whose gi (python3-gi) the notification daemon runs on."""


@pytest.fixture
def desktop(tmp_path) -> Iterator[dict[str, str]]:
    """An X display (Xvfb) and a fresh user's XDG directories, as a session has them."""
    home = tmp_path / "home"
    for sub in ("data", "config", "run"):
        (home / sub).mkdir(parents=True)
    (home / "run").chmod(0o700)
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as said:
            display = said.readline().strip()
        assert display, "Xvfb named no display"
        yield {**os.environ, "DISPLAY": f":{display}", "HOME": str(home),
               "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
               "XDG_RUNTIME_DIR": str(home / "run")}
    finally:
        subprocess.run(["pkill", "-f", f"pcmanfm {home}"], check=False)
        for mnt in (home / "run" / "zarrfuse").glob("*"):
            force_unmount(mnt)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


def _desktop_state(env: dict[str, str]) -> str:
    """What the display shows and which openers run: why a window did not come (this test
    failed twice under a full run's load, and passed alone every time)."""
    windows = run_with_timeout(["xdotool", "search", "--name", "."], 30, check=False, env=env)
    names = [run_with_timeout(["xdotool", "getwindowname", w], 30, check=False,
                              env=env).stdout.strip() for w in windows.stdout.split()]
    table = run_with_timeout(["ps", "-ww", "-eo", "pid=,comm=,args="], 30, check=False).stdout
    running = [line.strip() for line in table.splitlines()
               if line.split()[1:2] and line.split()[1] in ("pcmanfm", "xdg-open", "gio")]
    return f"windows {names}; processes {running}"


def _requests(mnt: Path, env: dict[str, str]) -> dict[str, int]:
    out = run_with_timeout([*ZARRFUSE, "stats", "--json", mnt], 30, env=env).stdout
    return json.loads(out)["counters"]["requests"]


@pytest.mark.fuse
@pytest.mark.timeout(120)
@needs_desktop
def test_pcmanfm_shows_the_mount_its_action_made(desktop, array_v3):
    env = desktop
    handler = run_with_timeout(["xdg-mime", "query", "default", "inode/directory"], 30, env=env)
    if handler.stdout.strip() != "pcmanfm.desktop":
        pytest.skip(f"pcmanfm is not this desktop's folder handler ({handler.stdout.strip()})")
    run_with_timeout([*ZARRFUSE, "desktop", "install"], 60, env=env)
    after = run_with_timeout(["xdg-mime", "query", "default", "inode/directory"], 30, env=env)
    assert after.stdout == handler.stdout  # install took no folder over
    action = configparser.ConfigParser(interpolation=None)
    action.read(Path(env["XDG_DATA_HOME"]) / "file-manager/actions/zarrfuse-images.desktop")
    command = [str(array_v3) if word == "%f" else word
               for word in shlex.split(action["X-Action-Profile folder"]["Exec"])]
    done = run_with_timeout(command, 60, env=env)
    mnt = Path(done.stdout.strip())
    assert mnt.parent == Path(env["XDG_RUNTIME_DIR"]) / "zarrfuse" and is_mounted(mnt)
    # pcmanfm opens the mount: its window is named after the folder, and it lists it. A
    # GTK program's first start beside a full test run's load took over 30 s once.
    assert wait_for(lambda: subprocess.run(
        ["xdotool", "search", "--name", f"^{mnt.name}$"], env=env,
        capture_output=True).returncode == 0, 60), (
        f"no pcmanfm window for the mount; {_desktop_state(env)}")
    assert wait_for(lambda: _requests(mnt, env).get("readdir", 0) > 0, 30)
    assert "planes" in os.listdir(mnt)  # what it listed: the tiles' folder


def test_the_mount_opens_in_the_file_manager_that_ran_the_action(tmp_path):
    """An action run by pcmanfm (through a shell, as file managers run them)."""
    pretend = tmp_path / "pcmanfm"
    shutil.copy("/bin/sh", pretend)
    probe = (f"{sys.executable} -c 'from zarrfuse.cli.desktop import calling_file_manager;"
             " print(calling_file_manager())'")
    ran = run_with_timeout([pretend, "-c", f"sh -c \"{probe}\""], 30)
    assert ran.stdout.strip() == "pcmanfm"
    assert calling_file_manager() is None  # pytest's ancestors are no file manager


@pytest.fixture
def notifications(desktop, tmp_path) -> Iterator[tuple[dict[str, str], Path]]:
    """The desktop with a session bus (a private dbus-daemon) and a notification daemon on
    it (``tests/notification_server.py``); the file where the daemon writes what it got."""
    if not all(shutil.which(tool) for tool in ("dbus-daemon", "gdbus")) or subprocess.run(
            [SYSTEM_PYTHON, "-c", "from gi.repository import Gio"], capture_output=True,
            check=False).returncode != 0:
        pytest.skip("needs dbus-daemon, gdbus and the system python3's gi (scripts/dev)")
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, text=True)
    told = tmp_path / "told"
    server = None
    try:
        address = bus.stdout.readline().strip()  # type: ignore[union-attr]
        assert address, "dbus-daemon named no address"
        env = {**desktop, "DBUS_SESSION_BUS_ADDRESS": address}
        server = subprocess.Popen([SYSTEM_PYTHON, Path(__file__).parents[1] /
                                   "notification_server.py", told], env=env,
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
        yield env, told
    finally:
        for process in (server, bus):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)


def _thunar_folder(tmp_path: Path) -> Path:
    """Where Thunar may run an action: a folder holding a folder named ``zarrfuse``, a
    package that ``python -m zarrfuse`` run there would import instead of zarrfuse."""
    where = tmp_path / "projects"
    (where / "zarrfuse").mkdir(parents=True)
    (where / "zarrfuse" / "__init__.py").write_text("")
    return where


def _action(folder: Path) -> list[str]:
    """What the installed action runs for ``folder`` (no window opened)."""
    return [*shlex.split(desktop_command()), "desktop", "open", str(folder), "--no-open"]


@needs_xvfb
def test_a_failed_action_is_a_notification_and_leaves_no_folder(notifications, tmp_path):
    """From a folder holding a ``zarrfuse`` folder, as Thunar runs it: a Zarr folder whose
    mount fails (its zarr.json is no JSON) is one notification with the line stderr says,
    received by the desktop's notification daemon; no mountpoint folder is left."""
    env, told = notifications
    folder = tmp_path / "broken.zarr"
    folder.mkdir()
    (folder / "zarr.json").write_text("{not json")
    done = run_with_timeout(_action(folder), 120, check=False, env=env,
                            cwd=_thunar_folder(tmp_path))
    assert done.returncode == 1
    reason = done.stderr.strip().splitlines()[-1].removeprefix("zarrfuse: ")
    assert "zarr.json" in reason and "Traceback" not in done.stderr
    shown = [json.loads(line) for line in told.read_text().splitlines()]
    assert shown == [{"app": "zarrfuse", "icon": "dialog-error",
                      "summary": "zarrfuse could not mount", "body": reason}]
    assert list((Path(env["XDG_RUNTIME_DIR"]) / "zarrfuse").iterdir()) == []
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_with_timeout(_action(plain), 60, check=False, env=env)
    reason = f"{plain}: not a Zarr array or group (no zarr.json, .zarray, .zgroup)"
    assert done.stderr.strip() == f"zarrfuse: {reason}"
    assert json.loads(told.read_text().splitlines()[-1])["body"] == reason


@pytest.mark.fuse
@pytest.mark.timeout(120)
@needs_xvfb
def test_the_action_mounts_from_a_folder_holding_a_zarrfuse_folder(desktop, array_v3,
                                                                    tmp_path):
    done = run_with_timeout(_action(array_v3), 120, check=False, env=desktop,
                            cwd=_thunar_folder(tmp_path))
    assert done.returncode == 0, done.stderr
    mnt = Path(done.stdout.strip())
    try:
        assert is_mounted(mnt) and "planes" in os.listdir(mnt)
    finally:
        force_unmount(mnt)
