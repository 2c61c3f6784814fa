"""Real FUSE mounts: editors, stream editors and image tools save onto chunks their own way.

Each tool runs unchanged on a chunk file (temp file + rename, backup copies, probes, O_TRUNC
opens closed empty, in-place rewrites). Every save must leave the array holding the new
value, and the daemon's log must hold no ERROR line.
"""

from __future__ import annotations

import ctypes
import errno
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted, run_with_timeout, wait_for

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

ROW = 64
TOOLS = ["sed", "perl", "mkstemp", "named", "copyfile", "gio", "vim", "emacs", "inplace",
         "backup", "dot-mkstemp"]


def text_row(letter: str) -> bytes:
    """One chunk: 63 copies of ``letter`` and a newline, so line editors can edit it."""
    return letter.encode() * (ROW - 1) + b"\n"


@pytest.fixture
def text_array(tmp_path) -> Path:
    """One uncompressed uint8 chunk per row (``bytes`` codec only): its bytes are a text line
    of ``a``s, and any same-length edit is a valid chunk."""
    path = tmp_path / "text"
    a = zarr.create_array(path, shape=(len(TOOLS), ROW), chunks=(1, ROW), dtype="u1",
                          compressors=None, fill_value=0)
    a[:] = np.frombuffer(text_row("a") * len(TOOLS), dtype="u1").reshape(len(TOOLS), ROW)
    return path


def log_errors(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if " ERROR " in line]


def renameat2_noreplace(old: Path, new: Path) -> None:
    """``renameat2(..., RENAME_NOREPLACE)``, as emacs renames its lock file into place."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(old), -100, os.fsencode(new), 1) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(new))


def emacs_save(path: Path, content: bytes) -> None:
    """The system calls GNU Emacs makes to save a visited file the first time (emacs itself
    is too heavy to install for this): auto-save file, lock, backup by renaming, write."""
    directory, name = path.parent, path.name
    autosave, lock = directory / f"#{name}#", directory / f".#{name}"
    autosave.write_bytes(content)  # auto-save-mode: O_WRONLY | O_CREAT | O_TRUNC
    info = b"user@host.1234:1700000000"
    with pytest.raises(PermissionError):  # the lock symlink is refused...
        os.symlink(info, lock)
    # ... so emacs writes the lock to a nonce file and renames it into place, not replacing.
    fd, nonce = tempfile.mkstemp(prefix=".#-emacs", dir=directory)
    os.write(fd, info)
    os.fchmod(fd, 0o444)
    os.close(fd)
    renameat2_noreplace(Path(nonce), lock)
    with pytest.raises(PermissionError):  # backup by renaming: refused, emacs backs up elsewhere
        os.rename(path, directory / f"{name}~")
    path.write_bytes(content)  # write-region: O_WRONLY | O_CREAT | O_TRUNC
    autosave.unlink()
    lock.unlink()


def rsync_sees_a_new_version(*incoming: Path) -> None:
    """Date these files in 2001. rsync skips a file whose size and mtime (to the second) equal
    the destination's: a chunk written the same second as an equal-sized incoming file would
    be left alone, as rsync leaves it anywhere, and the test would see no save at all."""
    for path in incoming:
        os.utime(path, (1_000_000_000, 1_000_000_000))


def test_text_tools_save_onto_raw_chunks(text_array, tmp_path):
    log, incoming = tmp_path / "daemon.log", tmp_path / "incoming"
    incoming.mkdir()
    with mounted(text_array, tmp_path / "mnt", "--log-file", str(log)) as mnt:
        chunk = {tool: mnt / f"c/0/{row:03d}/0/000" for row, tool in enumerate(TOOLS)}
        run_with_timeout(["sed", "-i", "s/a/b/", chunk["sed"]])
        run_with_timeout(["perl", "-pi", "-e", "s/a/c/", chunk["perl"]])

        fd, temp = tempfile.mkstemp(dir=chunk["mkstemp"].parent)
        os.write(fd, text_row("d"))
        os.close(fd)
        os.replace(temp, chunk["mkstemp"])
        with tempfile.NamedTemporaryFile(dir=chunk["named"].parent, delete=False) as f:
            f.write(text_row("e"))
        os.replace(f.name, chunk["named"])

        (incoming / "f").write_bytes(text_row("f"))
        shutil.copyfile(incoming / "f", chunk["copyfile"])  # over the existing chunk
        (incoming / "g").write_bytes(text_row("g"))  # .goutputstream-XXXXXX, then rename
        run_with_timeout(["sh", "-c", 'gio save "$1" < "$2"', "sh", chunk["gio"], incoming / "g"])

        # vim: swap file .000.swp, the 4913 probe (refused: vim then overwrites in place),
        # the 000~ backup it keeps.
        run_with_timeout(["vim", "-E", "-s", "-u", "NONE", "-N", "-i", "NONE", "-c",
                          "set backup writebackup backupcopy=auto backupskip= swapfile",
                          "-c", "s/a/h/", "-c", "wq", chunk["vim"]])
        assert (chunk["vim"].parent / "000~").read_bytes() == text_row("a")
        emacs_save(chunk["emacs"], text_row("i"))

        (incoming / "j").write_bytes(text_row("j"))
        (incoming / "k").write_bytes(text_row("k"))
        rsync_sees_a_new_version(incoming / "j", incoming / "k")
        run_with_timeout(["rsync", "--inplace", incoming / "j", chunk["inplace"]])
        run_with_timeout(["rsync", "--backup", incoming / "k", chunk["backup"]])
        assert (chunk["backup"].parent / "000~").read_bytes() == text_row("a")
        os.unlink(chunk["backup"].parent / "000~")

        # A hidden mkstemp file, refilled by shutil.copyfile (O_TRUNC on a scratch file).
        fd, temp = tempfile.mkstemp(prefix=".", dir=chunk["dot-mkstemp"].parent)
        os.write(fd, b"some longer first content " * 4)
        os.close(fd)
        (incoming / "l").write_bytes(text_row("l"))
        shutil.copyfile(incoming / "l", temp)
        assert Path(temp).read_bytes() == text_row("l")
        os.replace(temp, chunk["dot-mkstemp"])

        left = {tool: sorted(os.listdir(c.parent)) for tool, c in chunk.items()}
        assert left == {tool: ["000", "000~"] if tool == "vim" else ["000"] for tool in TOOLS}
    stored = zarr.open_array(text_array)[:]
    expected = {"sed": text_row("a").replace(b"a", b"b", 1),
                "perl": text_row("a").replace(b"a", b"c", 1),
                "mkstemp": text_row("d"), "named": text_row("e"), "copyfile": text_row("f"),
                "gio": text_row("g"), "vim": text_row("a").replace(b"a", b"h", 1),
                "emacs": text_row("i"), "inplace": text_row("j"), "backup": text_row("k"),
                "dot-mkstemp": text_row("l")}
    assert {tool: stored[row].tobytes() for row, tool in enumerate(TOOLS)} == expected
    assert log_errors(log) == []
    # vim's backup was still held at unmount: the log names it, with its size.
    assert "scratch file c/0/006/0/000~ (64 bytes) was never renamed onto a chunk" in (
        log.read_text())
    assert not [p for p in text_array.rglob("*") if "~" in p.name or p.name.startswith(".")]


def tiff_bytes(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value)
    return out.getvalue()


def test_image_tools_save_onto_a_tiff_view(tmp_path):
    path, log, incoming = tmp_path / "img", tmp_path / "daemon.log", tmp_path / "incoming"
    incoming.mkdir()
    a = zarr.create_array(path, shape=(16, 112), chunks=(16, 16), dtype="u1", fill_value=0)
    original = np.arange(16 * 112, dtype=np.uint32).reshape(16, 112).astype("u1")
    a[:] = original
    tools = ["mogrify", "convert", "mkstemp", "copyfile", "gio", "inplace", "backup"]
    new = {tool: np.full((16, 16), 10 * i + 1, dtype="u1") for i, tool in enumerate(tools)}
    with mounted(path, tmp_path / "mnt", "--format", "tiff", "--log-file", str(log)) as mnt:
        leaf = mnt / "planes"  # the grid is (1, 7): a rendered view leaves the row out
        chunk = {tool: leaf / f"x{i:03d}.tiff" for i, tool in enumerate(tools)}
        # ImageMagick: renames to a ~ backup (refused), opens O_TRUNC and closes it empty,
        # then writes the image through a second open.
        run_with_timeout(["mogrify", "-negate", chunk["mogrify"]], 60)
        run_with_timeout(["convert", chunk["convert"], "-negate", chunk["convert"]], 60)
        for tool in tools[2:]:
            (incoming / tool).write_bytes(tiff_bytes(new[tool]))
        fd, temp = tempfile.mkstemp(dir=leaf, suffix=".tiff")
        os.write(fd, tiff_bytes(new["mkstemp"]))
        os.close(fd)
        os.replace(temp, chunk["mkstemp"])
        shutil.copyfile(incoming / "copyfile", chunk["copyfile"])
        run_with_timeout(["sh", "-c", 'gio save "$1" < "$2"', "sh", chunk["gio"],
                          incoming / "gio"])
        rsync_sees_a_new_version(incoming / "inplace", incoming / "backup")
        run_with_timeout(["rsync", "--inplace", incoming / "inplace", chunk["inplace"]])
        run_with_timeout(["rsync", "--backup", incoming / "backup", chunk["backup"]])
        os.unlink(leaf / "x006.tiff~")
        assert sorted(os.listdir(leaf)) == [f"x{i:03d}.tiff" for i in range(len(tools))]
    stored = zarr.open_array(path)[:]
    for i, tool in enumerate(tools):
        block = stored[:, 16 * i : 16 * (i + 1)]
        if tool in ("mogrify", "convert"):
            np.testing.assert_array_equal(block, 255 - original[:, 16 * i : 16 * (i + 1)])
        else:
            np.testing.assert_array_equal(block, new[tool], err_msg=tool)
    assert log_errors(log) == []
    assert "dropped at unmount" not in log.read_text()


def test_imagemagick_draws_onto_a_colour_tiff_and_its_opaque_alpha_is_dropped(tmp_path):
    """``convert F -fill red -draw ... F`` writes RGBA (alpha all opaque) onto an RGB chunk:
    stored as the RGB it is. A translucent alpha is refused, EINVAL, one line naming it."""
    path, log = tmp_path / "rgb", tmp_path / "daemon.log"
    original = np.random.default_rng(3).integers(0, 256, (128, 256, 3), dtype="u1")
    zarr.create_array(path, shape=original.shape, chunks=(128, 128, 3), dtype="u1",
                      fill_value=0)[:] = original
    convert = shutil.which("magick") or "convert"
    translucent = np.full((128, 128, 4), 255, "u1")
    translucent[5, 6, 3] = 128
    with mounted(path, tmp_path / "mnt", "--format", "tiff", "--log-file", str(log)) as mnt:
        drawn = mnt / "planes" / "x000.tiff"
        run_with_timeout([convert, drawn, "-fill", "red", "-draw", "rectangle 10,10,100,100",
                          drawn], 60)
        out = io.BytesIO()
        tifffile.imwrite(out, translucent, photometric="rgb", extrasamples=("unassalpha",))
        with pytest.raises(OSError) as refused:
            (mnt / "planes" / "x001.tiff").write_bytes(out.getvalue())

        def told() -> list[str]:
            return [line for line in log.read_text().splitlines()
                    if ("WARNING" in line or "ERROR" in line) and "alpha" in line]

        # The line is the RELEASE's, which the kernel sends after close() has returned.
        wait_for(lambda: told(), 30)
    assert refused.value.errno == errno.EINVAL
    expected = original.copy()
    expected[10:101, 10:101] = (255, 0, 0)  # the rectangle's corners, both included
    np.testing.assert_array_equal(zarr.open_array(path)[:], expected)
    assert len(told()) == 1 and "translucent in 1 of 16384 pixels" in told()[0], told()


@pytest.mark.parametrize("fmt", ["tiff", "npy", "png"])
def test_python_image_libraries_save_onto_a_chunk_with_no_error_logged(fmt, tmp_path):
    """tifffile.imwrite, numpy.save and PIL.Image.save write through more than one
    descriptor (numpy's tofile writes through a dup and closes it first): the flush of the
    half-written file stores nothing and logs no error; the last close stores the image."""
    path, log = tmp_path / "img", tmp_path / "daemon.log"
    dtype = "f8" if fmt != "png" else "u1"
    zarr.create_array(path, shape=(32, 32), chunks=(32, 32), dtype=dtype, fill_value=0)[...] = 1
    new = np.arange(32 * 32).reshape(32, 32).astype(dtype)
    with mounted(path, tmp_path / "mnt", "--format", fmt, "--log-file", str(log)) as mnt:
        (chunk,) = list(mnt.rglob(f"*.{fmt}"))
        if fmt == "tiff":
            tifffile.imwrite(chunk, new)
        elif fmt == "npy":
            np.save(chunk, new)
        else:
            Image.fromarray(new).save(chunk)
    np.testing.assert_array_equal(zarr.open_array(path)[...], new)
    assert log_errors(log) == []
