"""Real FUSE mounts: writing back the metadata documents a mount shows.

Restoring a backup taken from the mount (``tar x``, ``rsync -a``, ``cp``) writes every
document back byte for byte: that is accepted and changes nothing. A different document is
refused (EPERM), and ``rm`` of a document removes nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(params=["v3", "v2-source"])
def case(request, tmp_path) -> tuple[Path, list[str], list[str]]:
    """A stored array, the mount's extra options, and the documents its root shows."""
    path = tmp_path / "arr"
    v2 = request.param == "v2-source"
    a = zarr.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u1", fill_value=0,
                          compressors=None, zarr_format=2 if v2 else 3,
                          **({} if v2 else {"serializer": BytesCodec()}),
                          attributes={"title": "restore me"})
    a[:] = np.arange(64, dtype="u1").reshape(8, 8)
    if v2:
        return path, ["--layout", "source"], [".zarray", ".zattrs"]
    return path, [], ["zarr.json"]


def changed(document: bytes) -> bytes:
    """The same document with one attribute more: valid JSON, not the bytes shown."""
    parsed = json.loads(document)
    if "zarr_format" not in parsed:  # .zattrs holds the attributes themselves
        parsed = {**parsed, "extra": 1}
    else:
        parsed.setdefault("attributes", {})["extra"] = 1
    return json.dumps(parsed, indent=2).encode()


def test_tar_and_rsync_restore_of_the_mount_succeed_and_change_nothing(case, tmp_path):
    path, options, documents = case
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt", *options) as mnt:
        shown = snapshot(mnt)
        run_with_timeout(["tar", "cf", tmp_path / "b.tar", "-C", mnt, "."])
        run_with_timeout(["tar", "xf", tmp_path / "b.tar", "-C", mnt], 60)
        # A copy with new times: rsync then sends every file, as temp file + rename.
        shutil.copytree(mnt, tmp_path / "backup")
        run_with_timeout(["rsync", "-a", f"{tmp_path / 'backup'}/", f"{mnt}/"], 60)
        again = run_with_timeout(["rsync", "-ai", f"{tmp_path / 'backup'}/", f"{mnt}/"], 60)
        assert again.stdout == ""  # the times set were kept: nothing to send
        assert snapshot(mnt) == shown
        for name in documents:
            assert (mnt / name).read_bytes() == shown[name]
    assert snapshot(path) == before


def test_changed_documents_are_refused_by_tar_rsync_and_cp(case, tmp_path):
    path, options, documents = case
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt", *options) as mnt:
        shown = snapshot(mnt)
        backup = tmp_path / "backup"
        backup.mkdir()
        for name in documents:
            (backup / name).write_bytes(changed(shown[name]))
        run_with_timeout(["tar", "cf", tmp_path / "b.tar", "-C", backup, *documents])
        tar = run_with_timeout(["tar", "xf", tmp_path / "b.tar", "-C", mnt], 60, check=False)
        assert tar.returncode == 2 and "Operation not permitted" in tar.stderr
        rsync = run_with_timeout(["rsync", "-a", f"{backup}/", f"{mnt}/"], 60, check=False)
        assert rsync.returncode == 23 and "Operation not permitted" in rsync.stderr
        for name in documents:
            cp = run_with_timeout(["cp", backup / name, mnt / name], check=False)
            assert cp.returncode == 1 and "Operation not permitted" in cp.stderr
            # ... and the bytes shown, written back, are accepted.
            (backup / name).write_bytes(shown[name])
            run_with_timeout(["cp", backup / name, mnt / name])
        assert snapshot(mnt) == shown
    assert snapshot(path) == before


def test_rm_of_a_document_removes_nothing(case, tmp_path):
    path, options, documents = case
    before = snapshot(path)
    with mounted(path, tmp_path / "mnt", *options) as mnt:
        shown = snapshot(mnt)
        for name in documents:
            run_with_timeout(["rm", "-f", mnt / name])  # accepted as a replace's first step
            assert name in run_with_timeout(["ls", "-a", mnt]).stdout.split()
            assert (mnt / name).read_bytes() == shown[name]
        # Truncating a document is a change: refused when the file is closed.
        truncate = run_with_timeout(["truncate", "-s", "0", mnt / documents[0]], check=False)
        assert truncate.returncode != 0
        assert snapshot(mnt) == shown
    assert snapshot(path) == before


def test_read_only_mount_refuses_document_writes(case, tmp_path):
    path, options, documents = case
    with mounted(path, tmp_path / "mnt", "--read-only", *options) as mnt:
        for name in documents:
            rm = run_with_timeout(["rm", "-f", mnt / name], check=False)
            assert rm.returncode == 1 and "Read-only file system" in rm.stderr
