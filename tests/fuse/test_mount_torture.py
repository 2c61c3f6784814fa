"""The torture tier, reduced: issue 34's mapped-files load on a real writable mount, in
processes and in threads (``tests/torture.py``; ``bench/bench_torture.py`` runs it at full
size). Plain readers, private and shared read mappers, numpy.memmap r+ and plain mmap
read-write writers and ``cp``-like O_TRUNC writers work on the same two chunks: no wrong
read, no error, no death (SIGBUS), and every chunk stored is one writer's whole value."""

from __future__ import annotations

import pytest

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
