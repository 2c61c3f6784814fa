"""A symlink with ".." in it, resolved beneath the store root while files are renamed
elsewhere on the machine: the kernel may answer EAGAIN ("a rename raced the check that the
'..' stayed beneath the root", openat2(2)), which the store must ask again, never hand a
reader as "resource temporarily unavailable". A git-annex or DataLad dataset's chunks are
such symlinks; the full suite renames files all the time beside them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.mounting import wait_for
from zarrfuse.storage.beneath import Root

OPENS = 2000  # about 0.1 s; before the fix, 90 to 170 of them failed (4 runs)
RENAMES = """
import os, sys
a, b = sys.argv[1], sys.argv[2]
open(a, "w").close()
while True:
    os.rename(a, b)
    os.rename(b, a)
"""


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """An annex-like tree: ``store/c/0`` is a symlink to ``../../objects/o``."""
    (tmp_path / "objects").mkdir()
    (tmp_path / "objects" / "o").write_bytes(b"chunk")
    (tmp_path / "store" / "c").mkdir(parents=True)
    os.symlink("../../objects/o", tmp_path / "store" / "c" / "0")
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def test_a_dotdot_symlink_opens_while_files_are_renamed_elsewhere(dataset):
    root = Root(str(dataset))
    spin = dataset / "elsewhere"
    renamer = subprocess.Popen([sys.executable, "-c", RENAMES, str(spin / "a"), str(spin / "b")])
    failures: Counter[str] = Counter()
    try:
        assert wait_for(lambda: any(spin.iterdir()), 10), "the renames did not start"
        for _ in range(OPENS):
            try:
                fd = root.open_regular("store/c/0")
            except OSError as e:
                failures[f"{type(e).__name__} {e.errno}"] += 1
                continue
            assert fd is not None
            os.close(fd)
        assert renamer.poll() is None, "the renames stopped: the race was not exercised"
    finally:
        renamer.kill()
        renamer.wait()
    assert not failures
