"""A daemon killed at any moment leaves every chunk its old or its new value (issue 21,
point 4): multi-part commits go through a journal, finished or undone at the next mount.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

import zarrfuse
from tests.mounting import daemon_pid, force_unmount, mounted
from zarrfuse.storage.beneath import Root
from zarrfuse.storage.file_writes import write_all
from zarrfuse.storage.local_journal import JOURNAL_DIR, CommitJournal

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

ROWS, WIDTH = 8, 1 << 20
# A small part first, then the large one: a commit that replaced them one by one spent the
# large part's write between the two, where a kill left the new head on the old body.
PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".head", "size": 16}, {"key_suffix": ""}]}}]


def _value(v: int) -> bytes:
    return bytes([v]) * WIDTH


def _stored_chunks(store: Path) -> dict[int, bytes]:
    out = {}
    for row in range(ROWS):
        main = store / "c" / str(row) / "0"
        out[row] = Path(f"{main}.head").read_bytes() + main.read_bytes()
    return out


def test_kill_9_under_parallel_writers_leaves_every_chunk_old_or_new(tmp_path):
    store = tmp_path / "a.zarr"
    zarrfuse.create_array(store, shape=(ROWS, WIDTH), chunks=(1, WIDTH), dtype="u1",
                          compressors=None, fill_value=255, storage_transformers=PARTS)[...] = 0
    values = {v: tmp_path / f"v{v}" for v in range(1, 40)}
    for v, path in values.items():
        path.write_bytes(_value(v))
    allowed = {_value(v) for v in (0, *values)}
    rng = random.Random(7)
    mnt = tmp_path / "mnt"
    for _ in range(10):
        with mounted(store, mnt, "--layout", "source") as live:
            pid = daemon_pid(live)
            writers = [
                subprocess.Popen(
                    ["sh", "-c", 'while :; do for f in "$@"; do cp "$f" "$0" || exit 0; done; done',
                     str(live / "c" / str(row) / "0"),
                     *map(str, rng.sample(list(values.values()), 5))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for row in range(ROWS)
            ]
            time.sleep(rng.uniform(0.2, 0.7))
            os.kill(pid, signal.SIGKILL)
            for w in writers:
                try:
                    w.wait(20)
                except subprocess.TimeoutExpired:
                    w.kill()
            force_unmount(live)
        # A chunk may be mid-commit now, with its journal records left. A read-only mount
        # may not finish it, and must never show it torn (issue 34 point 3).
        with mounted(store, mnt, "--layout", "source", "--read-only") as seen:
            for row in range(ROWS):
                shown = (seen / "c" / str(row) / "0").read_bytes()
                assert shown in allowed, f"a read-only mount showed chunk {row} torn"
    with mounted(store, mnt, "--layout", "source"):  # recovers
        pass
    stored = _stored_chunks(store)
    torn = {row: sorted(set(value))[:4] for row, value in stored.items() if value not in allowed}
    assert not torn, f"chunks neither old nor new after kill -9: {torn}"
    assert not list(store.rglob("*.partial")), "temp files left behind"
    assert not (store / JOURNAL_DIR).exists(), "journal left behind"


def _journal(tmp_path: Path) -> tuple[CommitJournal, Path]:
    root = tmp_path / "store"
    (root / "c").mkdir(parents=True)
    for name, data in (("c/0", b"old-main"), ("c/0.crc", b"old1")):
        (root / name).write_bytes(data)
    return CommitJournal(Root(str(root)), "", write_all), root


def _write_temps(root: Path, tx: str, kind: str | None) -> None:
    renames = [["c/0." + tx + ".partial", "c/0"], ["c/0.crc." + tx + ".partial", "c/0.crc"]]
    (root / f"c/0.{tx}.partial").write_bytes(b"new-main")
    (root / f"c/0.crc.{tx}.partial").write_bytes(b"new1")
    (root / JOURNAL_DIR).mkdir(exist_ok=True)
    (root / JOURNAL_DIR / f"{tx}.pending").write_text(json.dumps(renames))
    if kind == "commit":
        (root / JOURNAL_DIR / f"{tx}.commit").write_text(json.dumps(renames))


@pytest.mark.expect_log(r"commit\(s\) a crash interrupted")
@pytest.mark.parametrize("state, expected", [
    (None, (b"old-main", b"old1")),  # crashed before the commit record: undone
    ("commit", (b"new-main", b"new1")),  # after it: finished
])
def test_recovery_rolls_each_transaction_forward_or_back(tmp_path, state, expected):
    journal, root = _journal(tmp_path)
    _write_temps(root, "t1", state)
    if state == "commit":  # the crash came after the first rename
        os.replace(root / "c/0.t1.partial", root / "c/0")
    journal.recover()
    assert ((root / "c/0").read_bytes(), (root / "c/0.crc").read_bytes()) == expected
    assert sorted(p.name for p in (root / "c").iterdir()) == ["0", "0.crc"]
    assert not (root / JOURNAL_DIR).exists()  # removed once no commit is under way


def test_a_commit_replaces_every_part_and_leaves_no_record(tmp_path):
    journal, root = _journal(tmp_path)
    journal.commit([("c/0", [memoryview(b"abc")]), ("c/0.crc", [memoryview(b"1234")])], False)
    assert (root / "c/0").read_bytes() == b"abc" and (root / "c/0.crc").read_bytes() == b"1234"
    assert sorted(p.name for p in (root / "c").iterdir()) == ["0", "0.crc"]
    assert not (root / JOURNAL_DIR).exists()  # removed once no commit is under way
