"""``zarrfuse desktop install`` adds context-menu actions and changes nothing else (issue 33,
point 1): folders keep their handler, Thunar's own actions are kept, ``uninstall`` removes
exactly what ``install`` wrote, and both say what they did."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HOME_VARS = ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")

USER_ACTION = """<?xml version="1.0" encoding="UTF-8"?>
<actions>
<action><icon>utilities-terminal</icon><name>Open Terminal Here</name>
<unique-id>1234-mine</unique-id><command>exo-open --launch TerminalEmulator</command>
<patterns>*</patterns><directories/></action>
</actions>
"""


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    for name, sub in zip(HOME_VARS, ("", "data", "config"), strict=True):
        monkeypatch.setenv(name, str(tmp_path / sub))
    (tmp_path / "config" / "Thunar").mkdir(parents=True)
    (tmp_path / "config" / "Thunar" / "uca.xml").write_text(USER_ACTION)
    return tmp_path


def _zarrfuse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zarrfuse", *args], capture_output=True,
                          text=True, timeout=60, check=True, env=os.environ.copy())


def _folder_handler() -> str:
    return subprocess.run(["xdg-mime", "query", "default", "inode/directory"],
                          capture_output=True, text=True, timeout=30,
                          env=os.environ.copy()).stdout.strip()


@pytest.mark.skipif(shutil.which("xdg-mime") is None, reason="xdg-utils is not installed")
def test_install_leaves_folders_to_their_handler(home):
    before = _folder_handler()
    _zarrfuse("desktop", "install")
    assert _folder_handler() == before
    assert not [p for p in (home / "data").rglob("*.desktop")
                if "applications" in p.parts]  # no "Open With" application at all


def test_install_writes_two_actions_per_file_manager_and_says_so(home):
    out = _zarrfuse("desktop", "install").stdout.splitlines()
    data = home / "data"
    for key in ("images", "ome-tiff"):
        action = configparser.ConfigParser(interpolation=None)
        action.read(data / "file-manager" / "actions" / f"zarrfuse-{key}.desktop")
        assert action["X-Action-Profile folder"]["MimeTypes"] == "inode/directory;"
        assert f"wrote {data / 'file-manager' / 'actions' / f'zarrfuse-{key}.desktop'}" in out
    ome = configparser.ConfigParser(interpolation=None)
    ome.read(data / "file-manager" / "actions" / "zarrfuse-ome-tiff.desktop")
    assert ome["X-Action-Profile folder"]["Exec"].endswith("desktop open %f --format ome-tiff")
    dolphin = (data / "kio" / "servicemenus" / "zarrfuse.desktop").read_text()
    assert "Actions=images;ome-tiff;" in dolphin and "Mount as one image (OME-TIFF)" in dolphin
    assert os.access(data / "nautilus" / "scripts" / "Mount as images (zarrfuse)", os.X_OK)
    uca = (home / "config" / "Thunar" / "uca.xml").read_text()
    assert "Open Terminal Here" in uca and "1234-mine" in uca  # the user's own, kept
    assert uca.count("<unique-id>zarrfuse-") == 2
    _zarrfuse("desktop", "install")  # again: replaced, not doubled
    assert (home / "config" / "Thunar" / "uca.xml").read_text().count("zarrfuse-images") == 1


def test_uninstall_removes_exactly_what_install_wrote_and_the_old_folder_handler(home):
    old = home / "data" / "applications" / "zarrfuse-open.desktop"
    old.parent.mkdir(parents=True)
    old.write_text("[Desktop Entry]\nMimeType=inode/directory;\n")  # an earlier release's
    installed = _zarrfuse("desktop", "install").stdout
    assert f"removed {old}" in installed and not old.exists()
    removed = _zarrfuse("desktop", "uninstall").stdout.splitlines()
    assert len([line for line in removed if line.startswith("removed ")]) == 8
    assert not [p for p in (home / "data").rglob("*")  # but the Open With cache
                if p.is_file() and p.name != "mimeinfo.cache"]
    uca = (home / "config" / "Thunar" / "uca.xml").read_text()
    assert "1234-mine" in uca and "zarrfuse-" not in uca
    assert _zarrfuse("desktop", "uninstall").stdout.strip() == "nothing to remove"
