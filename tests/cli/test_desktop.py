"""Mounting from the file manager (issue 23, point 8): ``zarrfuse desktop install`` writes
entries that pass ``desktop-file-validate``; their command line, run as a file manager runs
it, mounts the folder as images under ``$XDG_RUNTIME_DIR`` and opens it; ``zarrfuse umount
--all`` takes down the user's mounts and no one else's.

Run as a throw-away user (a FUSE mount of one user is not even visible to root without
``allow_other``), with ``xdg-open`` standing for the desktop: a script that records what it
was asked to open.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_permissions import (  # noqa: F401  (fixtures)
    as_user,
    copy_for,
    fuse_device_mode,
    other_user,
    shared_dir,
    user_zarrfuse,
)
from tests.mounting import ZARRFUSE, is_mounted, mounted, requires_fuse, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180), requires_fuse]


def _user_env(home: Path) -> list[str]:
    return [
        "env", f"HOME={home}", f"XDG_DATA_HOME={home / 'data'}",
        f"XDG_RUNTIME_DIR={home / 'run'}", f"PATH={home / 'bin'}:{os.environ['PATH']}",
    ]


def _prepare_home(user, home: Path) -> None:
    for sub in ("data", "run", "bin"):
        (home / sub).mkdir()
        os.chown(home / sub, user.pw_uid, user.pw_gid)
    (home / "run").chmod(0o700)
    opener = home / "bin" / "xdg-open"
    opener.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {home}/opened\n')
    opener.chmod(0o755)


@contextlib.contextmanager
def _unmounted_after(user, env: list[str], zarrfuse: list[str]) -> Iterator[None]:
    """The user's mounts are unmounted when the block ends, even when it fails."""
    try:
        yield
    finally:
        as_user(user, *env, *zarrfuse, "umount", "--all")


def _opened(home: Path, count: int, timeout: float = 20) -> list[str]:
    """The folders the stand-in opener was given, once it has been given ``count``: the
    action starts the opener and returns without waiting for it (a poll with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = (home / "opened").read_text().split() if (home / "opened").exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def test_the_entries_validate_and_their_command_mounts_and_opens_the_folder(
    other_user, shared_dir, array_v3, tmp_path, user_zarrfuse  # noqa: F811
):
    user, home = other_user, shared_dir
    _prepare_home(user, home)
    folder = copy_for(user, array_v3, home)
    zarrfuse = user_zarrfuse
    # The user's environment, with the PYTHONPATH its zarrfuse needs (the test venv may be
    # out of its reach), as a desktop session would have it for everything it starts.
    env = _user_env(home) + [word for word in zarrfuse[1:] if "=" in word]
    installed = as_user(user, *env, *zarrfuse, "desktop", "install")
    assert installed.returncode == 0, installed.stderr
    data = home / "data"
    action = configparser.ConfigParser(interpolation=None)
    action.read(data / "file-manager" / "actions" / "zarrfuse-images.desktop")
    assert action["Desktop Entry"]["Type"] == "Action"
    assert action["X-Action-Profile folder"]["MimeTypes"] == "inode/directory;"
    nemo = (data / "nemo" / "actions" / "zarrfuse-images.nemo_action").read_text()
    assert "desktop open %F" in nemo and "Extensions=dir;" in nemo
    command = [folder if word == "%f" else word  # what pcmanfm runs for "Mount as images"
               for word in shlex.split(action["X-Action-Profile folder"]["Exec"])]
    with fuse_device_mode(0o666), mounted(array_v3, tmp_path / "root-mnt"), \
            _unmounted_after(user, env, zarrfuse):  # root's mount is not the user's
        done = as_user(user, *env, *command)  # what the file manager runs
        assert done.returncode == 0, done.stderr
        where = Path(done.stdout.strip())
        assert where.parent == home / "run" / "zarrfuse" and is_mounted(where)
        found = as_user(user, "find", where, "-name", "*.tiff")
        assert found.returncode == 0 and found.stdout.split(), found.stderr
        assert _opened(home, 1) == [str(where)]
        again = as_user(user, *env, *command)  # mounted already: opened again, not remounted
        assert again.returncode == 0 and Path(again.stdout.strip()) == where
        script = data / "nautilus" / "scripts" / "Mount as images (zarrfuse)"
        second = copy_for(user, array_v3, home / "bin")
        nautilus = as_user(user, *env, f"NAUTILUS_SCRIPT_SELECTED_FILE_PATHS={second}\n",
                           script)
        assert nautilus.returncode == 0, nautilus.stderr
        mounts = [Path(p) for p in _opened(home, 3)]  # the first twice, then the second
        assert len(set(mounts)) == 2 and all(is_mounted(m) for m in mounts)
        down = as_user(user, *env, *zarrfuse, "umount", "--all")
        assert down.returncode == 0, down.stderr
        assert not any(is_mounted(m) for m in mounts)
        assert is_mounted(tmp_path / "root-mnt")  # not this user's: left alone


def test_desktop_open_of_a_folder_that_is_not_zarr_is_one_line(tmp_path):
    done = run_with_timeout([*ZARRFUSE, "desktop", "open", tmp_path, "--no-open"], check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"zarrfuse: {tmp_path}: not a Zarr array or group (no zarr.json, .zarray, .zgroup)")
