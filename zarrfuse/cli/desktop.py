"""Mounting from the file manager: ``zarrfuse desktop install|uninstall|open``.

``install`` adds context-menu actions on folders, and nothing else: zarrfuse never becomes
a handler of folders, so ``xdg-open`` of a plain folder still opens the file manager (an
"Open With" application for ``inode/directory`` took over every folder on desktops with no
default set). Two actions, "Mount as images" (``--format tiff``, one image per chunk) and
"Mount as one image (OME-TIFF)", for the calling user:

- ``$XDG_DATA_HOME/file-manager/actions/zarrfuse-*.desktop``: FileManager-Actions entries,
  read by pcmanfm (libfm), Caja and Nemo's older releases;
- ``$XDG_DATA_HOME/nemo/actions/zarrfuse-*.nemo_action``: Nemo;
- ``$XDG_DATA_HOME/nautilus/scripts/...``: Nautilus's Scripts menu;
- ``$XDG_DATA_HOME/kio/servicemenus/zarrfuse.desktop``: Dolphin's service menu;
- ``$XDG_CONFIG_HOME/Thunar/uca.xml``: Thunar's custom actions, merged: the user's own
  actions are kept, ours are found again by their unique ids.

Each runs ``zarrfuse desktop open FOLDER [--format ome-tiff]``: the Zarr folder is mounted
read-only under ``$XDG_RUNTIME_DIR/zarrfuse/`` and the mount opened in the file manager
that ran the action (found among this process's ancestors), else with ``xdg-open``. The
action has no terminal: a failure is also a desktop notification with its one-line reason,
sent over D-Bus by ``gdbus`` (GLib's, on every GTK desktop; ``notify-send`` is a package
many lack), and no empty mountpoint folder is left behind.
``uninstall`` removes exactly what ``install`` wrote (and the folder handler of earlier
releases); both print each file they changed. ``zarrfuse umount --all`` takes down every
mount of the user.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from zarrfuse.errors import MountError, SourceError, ZarrFuseError
from zarrfuse.fuse.mountpoint import is_mounted, mount_entries

__all__ = ["ACTIONS", "calling_file_manager", "install", "mount_folder", "runtime_mountpoint",
           "tell_the_desktop", "uninstall", "user_mounts"]

ACTIONS = {"images": ("Mount as images", "tiff"),
           "ome-tiff": ("Mount as one image (OME-TIFF)", "ome-tiff")}
"""Action id -> (the menu's words, the ``--format`` it mounts with)."""
ZARR_MARKERS = ("zarr.json", ".zarray", ".zgroup")
_OLD_HANDLER = "applications/zarrfuse-open.desktop"
"""The folder handler earlier releases installed: removed by install and uninstall."""
_UCA_ID = "zarrfuse-{}"


def _command() -> str:
    """The zarrfuse command line the entries run: this installation's, by absolute path
    (its script beside this Python, else this Python's ``-m zarrfuse``), never whichever
    ``zarrfuse`` comes first on PATH."""
    script = Path(sys.executable).with_name("zarrfuse")
    if script.is_file() and os.access(script, os.X_OK):
        return str(script)
    return f"{sys.executable} -P -m zarrfuse"  # -P: never a ./zarrfuse of the folder it runs in


def _data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _open(command: str, fmt: str, selection: str) -> str:
    extra = "" if fmt == "tiff" else f" --format {fmt}"
    return f"{command} desktop open {selection}{extra}"


def _entries(command: str) -> dict[str, str]:
    """File (below the data home) -> its text."""
    out: dict[str, str] = {}
    for key, (label, fmt) in ACTIONS.items():
        out[f"file-manager/actions/zarrfuse-{key}.desktop"] = (
            "[Desktop Entry]\n"
            "Type=Action\n"
            f"Name={label}\n"
            "Icon=image-x-generic\n"
            "Profiles=folder;\n"
            "\n"
            "[X-Action-Profile folder]\n"
            "MimeTypes=inode/directory;\n"
            "SelectionCount==1\n"
            f"Exec={_open(command, fmt, '%f')}\n"
        )
        out[f"nemo/actions/zarrfuse-{key}.nemo_action"] = (
            "[Nemo Action]\n"
            f"Name={label}\n"
            f"Exec={_open(command, fmt, '%F')}\n"
            "Icon-Name=image-x-generic\n"
            "Selection=s\n"
            "Extensions=dir;\n"
        )
        out[f"nautilus/scripts/{label} (zarrfuse)"] = (
            "#!/bin/sh\n"
            "# Nautilus passes the selection one path per line.\n"
            'printf %s "$NAUTILUS_SCRIPT_SELECTED_FILE_PATHS" | while IFS= read -r folder; do\n'
            f'    [ -n "$folder" ] && {_open(command, fmt, chr(34) + "$folder" + chr(34))}\n'
            "done\n"
        )
    dolphin = ["[Desktop Entry]", "Type=Service", "MimeType=inode/directory;",
               "X-KDE-ServiceTypes=KonqPopupMenu/Plugin", "Actions=" + ";".join(ACTIONS) + ";"]
    for key, (label, fmt) in ACTIONS.items():
        dolphin += ["", f"[Desktop Action {key}]", f"Name={label}", "Icon=image-x-generic",
                    f"Exec={_open(command, fmt, '%f')}"]
    out["kio/servicemenus/zarrfuse.desktop"] = "\n".join(dolphin) + "\n"
    return out


def _thunar_actions(command: str) -> list[ET.Element]:
    actions = []
    for key, (label, fmt) in ACTIONS.items():
        action = ET.Element("action")
        for tag, text in (("icon", "image-x-generic"), ("name", label),
                          ("unique-id", _UCA_ID.format(key)),
                          ("command", _open(command, fmt, "%f")),
                          ("description", "Mount this Zarr folder with zarrfuse"),
                          ("patterns", "*")):
            ET.SubElement(action, tag).text = text
        ET.SubElement(action, "directories")
        actions.append(action)
    return actions


def _merge_thunar(command: str | None) -> Path | None:
    """Thunar's ``uca.xml`` with our actions (``command``; None: without them), every other
    action kept; the file if it changed."""
    path = _config_home() / "Thunar" / "uca.xml"
    ours = {_UCA_ID.format(key) for key in ACTIONS}
    if path.exists():
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:  # never overwrite what we cannot read
            raise MountError(f"{path}: not readable XML ({e}); left as it is") from None
    elif command is None:
        return None
    else:
        root = ET.Element("actions")
    before = ET.tostring(root)
    for action in list(root):
        if action.findtext("unique-id") in ours:
            root.remove(action)
    if command is not None:
        root.extend(_thunar_actions(command))
    if ET.tostring(root) == before:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="unicode", xml_declaration=True)
    return path


def install() -> list[str]:
    """Write the context-menu actions for this user; what was done, one line each."""
    done = _remove_old_handler()
    for name, text in _entries(_command()).items():
        path = _data_home() / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.startswith("nautilus/"):
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        done.append(f"wrote {path}")
    thunar = _merge_thunar(_command())
    if thunar is not None:
        done.append(f"added 2 actions to {thunar} (the others kept)")
    return done


def uninstall() -> list[str]:
    """Remove what :func:`install` wrote; what was done, one line each."""
    done = _remove_old_handler()
    for name in _entries(_command()):
        path = _data_home() / name
        if path.exists():
            path.unlink()
            done.append(f"removed {path}")
    thunar = _merge_thunar(None)
    if thunar is not None:
        done.append(f"removed zarrfuse's actions from {thunar} (the others kept)")
    return done


def _remove_old_handler() -> list[str]:
    path = _data_home() / _OLD_HANDLER
    if not path.exists():
        return []
    path.unlink()
    if shutil.which("update-desktop-database"):  # the "Open With" cache forgets it too
        subprocess.run(["update-desktop-database", str(path.parent)],
                       capture_output=True, timeout=30, check=False)
    return [f"removed {path} (the folder handler of an earlier release)"]


def runtime_mountpoint(folder: Path, fmt: str = "tiff") -> Path:
    """Where ``folder`` is mounted: ``$XDG_RUNTIME_DIR/zarrfuse/NAME-HASH`` (the hash keeps
    two folders of one name apart), ``NAME-HASH-ome-tiff`` as one image."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:8]
    view = "" if fmt == "tiff" else f"-{fmt}"
    return Path(runtime) / "zarrfuse" / f"{folder.name}-{digest}{view}"


FILE_MANAGERS = ("pcmanfm", "pcmanfm-qt", "thunar", "nautilus", "nemo", "caja", "dolphin")
"""File managers by process name (``/proc/PID/comm``, lower-cased: Thunar's is ``Thunar``),
each also the command that opens a folder in it."""


def calling_file_manager(pid: int | None = None, depth: int = 4) -> str | None:
    """The file manager that ran this action (it may have run it through a shell): the
    first known one among the ancestors of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    for _ in range(depth):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        pid = int(fields.get("PPid", "0").strip() or 0)
        if pid <= 1:
            return None
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return None
        if name.lower() in FILE_MANAGERS:
            return name.lower()
    return None


def _show(where: Path) -> None:
    """Open the mount in the file manager the action came from, else with xdg-open."""
    opener = calling_file_manager()
    command = [opener] if opener and shutil.which(opener) else (
        ["xdg-open"] if shutil.which("xdg-open") else None)
    if command is not None:
        subprocess.Popen([*command, str(where)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _gvariant(text: str) -> str:
    """``text`` as a GVariant string literal, on one line, valid UTF-8."""
    text = " ".join(text.encode(errors="replace").decode().split())
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tell_the_desktop(message: str) -> bool:
    """A desktop notification saying ``message`` (an action started from a file manager has
    no terminal to print on): the Notifications D-Bus call, typed so that it needs no
    introspection; False where there is no session bus or no one to show it."""
    if not shutil.which("gdbus") or not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return False
    call = ["gdbus", "call", "--session", "--timeout", "10",
            "--dest", "org.freedesktop.Notifications",
            "--object-path", "/org/freedesktop/Notifications",
            "--method", "org.freedesktop.Notifications.Notify", _gvariant("zarrfuse"),
            "uint32 0", _gvariant("dialog-error"), _gvariant("zarrfuse could not mount"),
            _gvariant(message), "@as []", "@a{sv} {}", "int32 -1"]
    try:
        sent = subprocess.run(call, capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):  # stderr says it still
        return False
    return sent.returncode == 0


def mount_folder(folder: str, *, open_it: bool = True, fmt: str = "tiff") -> Path:
    """``zarrfuse desktop open FOLDER``: mount it as images (once) and open the mount; a
    failure is also told to the desktop (``tell_the_desktop``), then raised."""
    try:
        where = _mount_once(Path(folder).resolve(), fmt)
    except Exception as e:  # whatever it is, the desktop is told
        tell_the_desktop(str(e) if isinstance(e, ZarrFuseError | OSError)
                         else f"{type(e).__name__}: {e}")
        raise
    print(where)
    if open_it:
        _show(where)
    return where


def _mount_once(source: Path, fmt: str) -> Path:
    if not any((source / marker).is_file() for marker in ZARR_MARKERS):
        raise SourceError(f"{source}: not a Zarr array or group (no zarr.json, .zarray, .zgroup)")
    where = runtime_mountpoint(source, fmt)
    if is_mounted(str(where)):
        return where
    where.mkdir(parents=True, exist_ok=True)
    try:  # cwd "/": a folder named zarrfuse where the action runs is no package to import
        done = subprocess.run(
            [sys.executable, "-m", "zarrfuse", "mount", str(source), str(where), "--read-only",
             "--format", fmt], capture_output=True, text=True, timeout=120, check=False,
            cwd="/")
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["mount failed"]
            said = [line for line in lines if line.startswith("zarrfuse: ")] or lines
            raise MountError(said[-1].removeprefix("zarrfuse: "))
    except BaseException:
        with contextlib.suppress(OSError):
            where.rmdir()  # never an empty folder left behind
        raise
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
