"""Sparse arrays through real mounts: ``find`` costs what is stored, not what the grid allows,
and every directory of the grid can still be entered and written into. Flat and dense
listings are tested in process: ``tests/filesystem/test_inprocess_tree.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mounted, requires_fuse, run_with_timeout
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding

pytestmark = [requires_fuse, pytest.mark.fuse]

SHAPE = (10**6, 10**6)  # 10**12 chunks of one byte
VIEW = FanoutChunkKeyEncoding(1000)
FIND_TIMEOUT = 15  # the grid-walking listing never finished; this takes about a second


def sparse_array(path: Path, points, separator: str = "/") -> Path:  # type: ignore[no-untyped-def]
    a = zarr.create_array(
        path, shape=SHAPE, chunks=(1, 1), dtype="u1", fill_value=0, compressors=None,
        chunk_key_encoding={"name": "default", "separator": separator},
    )
    for i, j in points:
        a[i, j] = 1 + (i + j) % 200
    return path


def random_points(n: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return sorted({(int(i), int(j)) for i, j in rng.integers(0, SHAPE[0], size=(n, 2))})


def view_paths(points) -> set[str]:  # type: ignore[no-untyped-def]
    return {VIEW.encode_chunk_key(p) for p in points}


def found_files(mnt: Path) -> set[str]:
    out = run_with_timeout(["find", mnt, "-type", "f", "-printf", "%P\n"], FIND_TIMEOUT).stdout
    return set(out.splitlines())


@pytest.fixture(scope="module")
def thousand(tmp_path_factory) -> tuple[Path, list[tuple[int, int]]]:  # type: ignore[no-untyped-def]
    points = random_points(1000, seed=15)
    return sparse_array(tmp_path_factory.mktemp("sparse") / "arr", points), points


def test_find_over_a_huge_sparse_grid_lists_exactly_the_stored_chunks(thousand, tmp_path):
    source, points = thousand
    with mounted(source, tmp_path / "mnt", "--read-only") as mnt:
        assert found_files(mnt) == view_paths(points) | {"zarr.json"}
        directories = run_with_timeout(["find", mnt / "c", "-type", "d"], FIND_TIMEOUT).stdout
        # every directory shown leads to a stored chunk: no more than the chunks' ancestors
        ancestors = {
            "/".join(key.split("/")[:n])
            for key in view_paths(points) for n in range(1, key.count("/") + 1)
        }
        assert len(directories.splitlines()) == len(ancestors)
        i, j = points[0]
        assert (mnt / VIEW.encode_chunk_key((i, j))).read_bytes() == bytes([1 + (i + j) % 200])


def test_an_empty_grid_directory_can_be_entered_and_written_into(tmp_path):
    points = random_points(20, seed=1)
    source = sparse_array(tmp_path / "arr", points)
    new = (123_456, 789_012)
    assert new not in points
    with mounted(source, tmp_path / "mnt") as mnt:
        key = VIEW.encode_chunk_key(new)
        leaf = mnt / key.rpartition("/")[0]
        assert run_with_timeout(["ls", leaf]).stdout == ""  # an empty directory, by name
        assert found_files(mnt) == view_paths(points) | {"zarr.json"}
        with open(mnt / key, "wb") as f:
            f.write(b"\x07")
            f.flush()
            assert key in found_files(mnt)  # open for writing: shown with its directories
        assert found_files(mnt) == view_paths([*points, new]) | {"zarr.json"}
    assert zarr.open_array(source)[new] == 7
    with mounted(source, tmp_path / "mnt2", "--read-only") as mnt:  # and from the store
        assert key in found_files(mnt)
