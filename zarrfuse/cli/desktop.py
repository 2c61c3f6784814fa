"""Mounting from the file manager: ``zarrfuse desktop install`` and ``zarrfuse desktop open``.

``install`` writes, for the calling user (under ``$XDG_DATA_HOME``, default
``~/.local/share``), one entry per way file managers offer commands on a folder:

- ``applications/zarrfuse-open.desktop``: an application for folders (``inode/directory``),
  listed under "Open With" by every Freedesktop file manager; it passes
  ``desktop-file-validate``;
- ``file-manager/actions/zarrfuse-open.desktop``: a FileManager-Actions context-menu entry,
  read by pcmanfm (libfm) and Caja (its ``Type=Action`` is that spec's, which
  ``desktop-file-validate`` does not know);
- ``nemo/actions/zarrfuse-open.nemo_action``: Nemo's context-menu entry;
- ``nautilus/scripts/Open as images (zarrfuse)``: Nautilus's Scripts menu.

Each runs ``zarrfuse desktop open FOLDER``: the Zarr folder is mounted read-only as
``--format tiff`` images under ``$XDG_RUNTIME_DIR/zarrfuse/`` and the mount is opened with
``xdg-open``. ``zarrfuse umount --all`` takes down every mount of the user.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from zarrfuse.errors import MountError, SourceError
from zarrfuse.fuse.mountpoint import is_mounted, mount_entries

__all__ = ["install", "mount_folder", "runtime_mountpoint", "user_mounts"]

ACTION_NAME = "Open as images (zarrfuse)"
ZARR_MARKERS = ("zarr.json", ".zarray", ".zgroup")


def _command() -> str:
    """The zarrfuse command line the entries run: this installation's, by absolute path."""
    found = shutil.which("zarrfuse")
    return f"{found}" if found else f"{sys.executable} -m zarrfuse"


def _data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _entries(command: str) -> dict[str, str]:
    """File (below the data home) -> its text."""
    application = (
        "[Desktop Entry]\n"
        "Type=Application\n"
        f"Name={ACTION_NAME}\n"
        "Comment=Mount a Zarr folder and show its chunks as images\n"
        "Icon=image-x-generic\n"
        f"Exec={command} desktop open %f\n"
        "MimeType=inode/directory;\n"
        "NoDisplay=true\n"
        "Terminal=false\n"
    )
    action = (
        "[Desktop Entry]\n"
        "Type=Action\n"
        f"Name={ACTION_NAME}\n"
        "Icon=image-x-generic\n"
        "Profiles=folder;\n"
        "\n"
        "[X-Action-Profile folder]\n"
        "MimeTypes=inode/directory;\n"
        "SelectionCount==1\n"
        f"Exec={command} desktop open %f\n"
    )
    nemo = (
        "[Nemo Action]\n"
        f"Name={ACTION_NAME}\n"
        f"Exec={command} desktop open %F\n"
        "Icon-Name=image-x-generic\n"
        "Selection=s\n"
        "Extensions=dir;\n"
    )
    nautilus = (
        "#!/bin/sh\n"
        "# Nautilus passes the selection one path per line.\n"
        'printf %s "$NAUTILUS_SCRIPT_SELECTED_FILE_PATHS" | while IFS= read -r folder; do\n'
        f'    [ -n "$folder" ] && {command} desktop open "$folder"\n'
        "done\n"
    )
    return {
        "applications/zarrfuse-open.desktop": application,
        "file-manager/actions/zarrfuse-open.desktop": action,
        "nemo/actions/zarrfuse-open.nemo_action": nemo,
        f"nautilus/scripts/{ACTION_NAME}": nautilus,
    }


def install() -> list[Path]:
    """Write the file-manager entries for this user; the files written."""
    written = []
    for name, text in _entries(_command()).items():
        path = _data_home() / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.startswith("nautilus/"):
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        written.append(path)
    if shutil.which("update-desktop-database"):  # best effort: the "Open With" cache
        subprocess.run(["update-desktop-database", str(_data_home() / "applications")],
                       capture_output=True, timeout=30, check=False)
    return written


def runtime_mountpoint(folder: Path) -> Path:
    """Where ``folder`` is mounted: ``$XDG_RUNTIME_DIR/zarrfuse/NAME-HASH`` (the hash keeps
    two folders of one name apart)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:8]
    return Path(runtime) / "zarrfuse" / f"{folder.name}-{digest}"


def mount_folder(folder: str, *, open_it: bool = True) -> Path:
    """``zarrfuse desktop open FOLDER``: mount it as images (once) and open the mount."""
    source = Path(folder).resolve()
    if not any((source / marker).is_file() for marker in ZARR_MARKERS):
        raise SourceError(f"{source}: not a Zarr array or group (no zarr.json, .zarray, .zgroup)")
    where = runtime_mountpoint(source)
    if not is_mounted(str(where)):
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "zarrfuse", "mount", str(source), str(where), "--read-only",
             "--format", "tiff"], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise MountError(done.stderr.strip().removeprefix("zarrfuse: ") or "mount failed")
    print(where)
    if open_it and shutil.which("xdg-open"):
        subprocess.Popen(["xdg-open", str(where)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return where


def user_mounts() -> list[str]:
    """The zarrfuse mounts of the calling user (root: every zarrfuse mount)."""
    uid = os.getuid()
    found = []
    for entry in mount_entries():
        owner = [o.removeprefix("user_id=") for o in entry.options.split(",")
                 if o.startswith("user_id=")]
        if entry.fstype == "fuse.zarrfuse" and (uid == 0 or owner == [str(uid)]):
            found.append(entry.mountpoint)
    return found
