"""The torture tier, reduced: issue 34's mapped-files load on a real writable mount, in
processes and in threads (``tests/torture.py``; ``python -m bench run torture`` at full
size). Plain readers, private and shared read mappers, numpy.memmap r+ and plain mmap
read-write writers and ``cp``-like O_TRUNC writers work on the same two chunks: no wrong
read, no error, no death (SIGBUS), and every chunk stored is one writer's whole value."""

from __future__ import annotations

import pytest

from tests.fsx import OPERATIONS, run_fsx
from tests.hostile import CASES, WEB_CASES, build_case, probe, probe_web
from tests.mounting import mounted
from tests.torture import make_array, run_load, stored_values

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(240)]

WORKERS = {"reader": 3, "private_mapper": 2, "shared_mapper": 2, "rw_mapper": 1,
           "rw_mmap": 1, "cp_writer": 2}


@pytest.mark.parametrize("threads", [False, True], ids=["processes", "threads"])
def test_mapped_files_load_gives_no_wrong_read_error_or_death(tmp_path, threads):
    names = make_array(tmp_path / "arr")
    with mounted(tmp_path / "arr", tmp_path / "mnt") as mnt:
        result = run_load(mnt, names, 6.0, WORKERS, threads=threads)
    print(result)
    assert result.deaths == [], result
    assert result.total("wrong") == 0, result
    assert result.errors() == {}, result
    for role, count in WORKERS.items():
        if count:
            assert result.counts[f"{role}.ops"] > 0, result
    assert all(stored_values(tmp_path / "arr", names))


@pytest.mark.parametrize("seed", [1, 2])
def test_fsx_random_io_with_a_shared_mapping_is_byte_exact(tmp_path, seed):
    """fsx-style (``tests/fsx.py``): pwrite, pread, mapped reads and writes, fsync and
    reopen on one chunk file; every read and every stored value equals the model's."""
    names = make_array(tmp_path / "arr", chunks=1)
    stored = tmp_path / "arr" / "c" / "0"
    with mounted(tmp_path / "arr", tmp_path / "mnt") as mnt:
        counts = run_fsx(mnt / names[0], stored.read_bytes, 400, seed)
    print(counts)
    assert counts["wrong"] == 0 and counts["errors"] == 0, counts
    assert all(counts[op] > 0 for op in OPERATIONS), counts


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_store_catalogue(tmp_path, case):
    """Each hostile case (``tests/hostile.py``; ``python -m bench run hostile`` runs both views
    with 1 GiB bombs): the mount comes up and keeps answering, nothing from outside is
    served, the healthy array reads exact, memory stays bounded, and a special file or a
    bomb answers EIO where it is read."""
    # 64 MiB bombs (their bound is shown in tests/api); the sharded one is 256 MiB, which
    # zarr's own sharding codec takes to 660 MiB RSS where nothing bounds it.
    group, _ = build_case(tmp_path / case, case, (256 if "sharded" in case else 64) << 20)
    view = "tiff" if CASES[case].kind == "bomb" else "raw"
    result = probe(group, tmp_path / "mnt", view, timeout=30)
    assert not result.bad, result
    if CASES[case].kind == "bomb" or (CASES[case].kind == "special"
                                      and CASES[case].at == "chunk"):
        assert result.eio >= 1, result


@pytest.mark.parametrize("case", sorted(WEB_CASES))
def test_hostile_web_server_catalogue(tmp_path, case):
    """Issue 52 point 6: a web server that lies about one chunk (``tests/hostile.py``'s
    ``WEB_CASES``) costs the daemon no memory (under 200 MiB with a 1.5 GiB body) and no
    hang; the chunk is EIO (or exact, where the lie was a whole answer to a range, cut at
    the bytes asked), the healthy array reads exact, and the log says the server's fault in
    WARNING lines, never an ERROR."""
    result, log = probe_web(tmp_path / case, case, tmp_path / "mnt")
    assert not result.bad and result.rss_peak_mib < 200, result
    lines = log.splitlines()
    assert not [line for line in lines if " ERROR " in line or "Traceback" in line], log
    said = WEB_CASES[case][1]
    if said is not None:
        assert result.eio >= 1, result
        warnings = [line for line in lines if " WARNING " in line]
        assert len(warnings) == 1 and said in warnings[0], log  # once, however often asked
