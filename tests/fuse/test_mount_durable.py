"""``fsync`` of a saved picture is durable on every view (issue 52, point 4): before the
writer's ``fsync()`` returns, the daemon has synced every file it renamed into the store and
the folder each rename changed; so has the ``close()`` of a file opened with ``O_SYNC``, which
is when such a file is stored (a write alone is half a chunk). The system calls are watched
with strace, the daemon and the writer in one trace, so "before" is the trace's own order: the
writer marks the moment its call returned with an ``unlink`` of a name that is not there.

Removing the commit records afterwards is not synced, on purpose: a record that comes back
after a power cut names temp files that are gone, and recovery skips them.
"""

from __future__ import annotations

import io
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

import zarrfuse
from tests.arrays import CRC_PARTS
from tests.mounting import daemon_pid, mounted, wait_for
from tests.picture_paths import tile_path
from zarrfuse.storage.local_journal import JOURNAL_DIR

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (scripts/dev)"),
]

TRACED = "fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat"
WRITER = """
import contextlib, os, sys
path, data, how, mark = sys.argv[1], open(sys.argv[2], "rb").read(), sys.argv[3], sys.argv[4]
sys.stdin.readline()  # strace is attached
fd = os.open(path, os.O_WRONLY | os.O_TRUNC | (os.O_SYNC if how == "O_SYNC" else 0))
os.write(fd, data)
if how == "fsync":
    os.fsync(fd)
else:
    os.close(fd)
with contextlib.suppress(FileNotFoundError):
    os.unlink(mark)  # strace's mark: the call above returned
if how == "fsync":
    os.close(fd)
"""
_LINE = re.compile(r"^(\d+) +(?:<\.\.\. )?(\w+)(?: resumed>|\()(.*)$")
_FD = re.compile(r"\d+<([^>]*)>")


def _traced(pids: Sequence[int], tracer: int) -> bool:
    """Whether every thread of ``pids`` is traced by ``tracer``."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            status = (task / "status").read_text()
            if f"TracerPid:\t{tracer}\n" not in status:
                return False
    return True


def _save_traced(tmp_path: Path, mnt: Path, path: str, data: bytes,
                 how: str = "fsync") -> list[tuple[int, str, str]]:
    """Save ``data`` onto ``path`` of the mount, then fsync it (``how``) or close it opened
    with O_SYNC, daemon and writer under strace; the daemon's calls until that call returned:
    (pid, call, arguments)."""
    image, log, mark = tmp_path / "image", tmp_path / "strace.log", tmp_path / "returned"
    image.write_bytes(data)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(mnt / path), str(image), how,
                               str(mark)], stdin=subprocess.PIPE, text=True)
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-y", "-o", str(log), "-e",
                               f"trace={TRACED}", "-p", str(daemon_pid(mnt)),
                               "-p", str(writer.pid)])
    try:
        assert wait_for(lambda: _traced([daemon_pid(mnt), writer.pid], tracer.pid), 20)
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
        assert writer.wait(30) == 0, "the writer's save failed"
    finally:
        writer.kill()
        tracer.send_signal(signal.SIGINT)  # detaches from the daemon, which serves on
        tracer.wait(20)
    calls = []
    for line in log.read_text().splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        pid, call, args = int(match[1]), match[2], match[3]
        if pid == writer.pid:
            if call == "unlink" and str(mark) in args:
                return calls
            continue
        if "unfinished" not in args:
            calls.append((pid, call, args))
    raise AssertionError(f"the writer's mark is not in the trace:\n{log.read_text()}")


def _assert_durable(calls: list[tuple[int, str, str]], store: Path, keys: Sequence[str]) -> None:
    """Each of ``keys`` was renamed into place; every file renamed into the store was synced
    before its rename, and the folder after it."""
    synced: list[str] = []  # paths fsynced so far, in order
    renamed: list[tuple[str, str, int]] = []  # (source, target, index in synced at rename)
    for _, call, args in calls:
        paths = _FD.findall(args)
        if call in ("fsync", "fdatasync") and paths:
            synced.append(paths[0])
        elif call.startswith("rename") and len(paths) == 2:
            names = re.findall(r'"([^"]*)"', args)
            source, target = (f"{d}/{n}" for d, n in zip(paths, names, strict=True))
            renamed.append((source, target, len(synced)))
    assert renamed, f"nothing was renamed into the store before the call returned: {calls}"
    targets = {target for _, target, _ in renamed}
    for key in keys:
        assert str(store / key) in targets, f"{key} was not stored before the call returned"
    for source, target, at in renamed:
        assert source in synced[:at], f"{source} was renamed onto {target} unsynced"
        folder = target.rpartition("/")[0]
        assert folder in synced[at:], f"the folder of {target} was not synced after the rename"


def _tiff(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value)
    return out.getvalue()


@pytest.mark.parametrize(("fmt", "how"), [("tiff", "fsync"), ("tiff", "O_SYNC"),
                                          ("raw", "O_SYNC")])
def test_fsync_or_an_o_sync_close_syncs_the_chunk_and_its_folder(tmp_path, fmt, how):
    store = tmp_path / "a.zarr"
    zarr.create_array(store, shape=(16, 16), chunks=(8, 8), dtype="u1", fill_value=0,
                      serializer=BytesCodec(), compressors=None)[...] = 1
    new = np.full((8, 8), 7, dtype="u1")
    path, data, layout = ((tile_path(0, 1, "tiff"), _tiff(new), "fanout") if fmt == "tiff"
                          else ("c/0/1", new.tobytes(), "source"))
    with mounted(store, tmp_path / "mnt", "--format", fmt, "--layout", layout) as mnt:
        calls = _save_traced(tmp_path, mnt, path, data, how)
    _assert_durable(calls, store, ["c/0/1"])
    assert (zarr.open_array(store, mode="r")[:8, 8:] == 7).all()


def test_fsync_of_a_shard_tile_syncs_the_shard_and_its_folder(tmp_path):
    store = tmp_path / "a.zarr"
    zarr.create_array(store, shape=(16, 16), chunks=(8, 8), shards=(16, 16), dtype="u1",
                      fill_value=0, compressors=None)[...] = 1
    new = np.full((8, 8), 7, dtype="u1")
    with mounted(store, tmp_path / "mnt", "--format", "tiff") as mnt:
        calls = _save_traced(tmp_path, mnt, tile_path(1, 0, "tiff"), _tiff(new))
    _assert_durable(calls, store, ["c/0/0"])
    stored = zarr.open_array(store, mode="r")[:]
    assert (stored[8:, :8] == 7).all() and (stored[:8] == 1).all()


def test_fsync_of_a_concat_parts_chunk_syncs_every_part_and_the_journal(tmp_path):
    store = tmp_path / "a.zarr"
    zarrfuse.create_array(store, shape=(16, 16), chunks=(8, 8), dtype="u1", fill_value=0,
                          serializer=BytesCodec(), compressors=[Crc32cCodec()],
                          storage_transformers=CRC_PARTS)[...] = 1
    new = np.full((8, 8), 7, dtype="u1")
    with mounted(store, tmp_path / "mnt", "--format", "tiff") as mnt:
        calls = _save_traced(tmp_path, mnt, tile_path(1, 1, "tiff"), _tiff(new))
    _assert_durable(calls, store, ["c/1/1", "c/1/1.crc32c"])
    assert any(call.startswith("rename") and JOURNAL_DIR in args for _, call, args in calls), (
        "the commit went past the journal")
    assert (zarrfuse.open_array(store, mode="r")[8:, 8:] == 7).all()


def test_fsync_of_a_level_0_save_syncs_the_lower_levels_it_updated(tmp_path):
    """A save into an OME-Zarr image's full resolution rewrites the levels below it: the
    ``fsync`` of the save syncs those chunks too (they are stored by the same commit)."""
    root = tmp_path / "img.ome.zarr"
    group = zarr.open_group(root, mode="w")
    for i, side in enumerate((16, 8)):
        zarr.create_array(root / str(i), shape=(side, side), chunks=(8, 8), dtype="u1",
                          fill_value=0, compressors=None)[...] = 1
    group.attrs.update({"ome": {"version": "0.5", "multiscales": [{
        "type": "mean",
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0**i, 2.0**i]}]} for i in range(2)]}]}})
    new = np.full((8, 8), 7, dtype="u1")
    with mounted(root, tmp_path / "mnt", "--format", "tiff") as mnt:
        calls = _save_traced(tmp_path, mnt, f"0/{tile_path(1, 1, 'tiff')}", _tiff(new))
    _assert_durable(calls, root, ["0/c/1/1", "1/c/0/0"])
    assert (zarr.open_array(root / "1", mode="r")[4:, 4:] == 7).all()
