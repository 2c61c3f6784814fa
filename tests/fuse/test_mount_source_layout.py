"""``--layout source``: chunk files at the arrays' own keys, concat-parts assembled, metadata as
stored minus storage transformers, so a Zarr reader that knows nothing of zarrfuse reads it.
Listings, assembled parts and documents alone, and rendered views holding no document, are
tested in process: ``tests/filesystem/test_inprocess_tree.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

import zarrfuse
from tests.arrays import CRC_PARTS
from tests.mounting import ZARRFUSE, mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def parted_group(tmp_path) -> tuple[Path, dict[str, np.ndarray]]:
    """A consolidated v3 group: a concat-parts array (``/`` keys, a hole) and a flat
    ``.``-separated one."""
    root = tmp_path / "g.zarr"
    zarr.open_group(root, mode="w")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1000, (20, 30), dtype="u2")
    parted = zarrfuse.create_array(
        root, name="parted", shape=a.shape, chunks=(10, 10), dtype="u2", fill_value=0,
        compressors=[ZstdCodec(), Crc32cCodec()], storage_transformers=CRC_PARTS)
    parted[:] = a
    parted[10:, 10:20] = 0  # chunk (1, 1): fill value, not stored
    a[10:, 10:20] = 0
    b = rng.random((6, 4)).astype("f4")
    zarr.create_array(root / "flat", shape=b.shape, chunks=(3, 2), dtype="f4",
                      chunk_key_encoding={"name": "default", "separator": "."})[:] = b
    zarr.consolidate_metadata(root)
    return root, {"parted": a, "flat": b}


def test_source_layout_shows_own_keys_with_parts_assembled(parted_group, tmp_path):
    root, expected = parted_group
    with mounted(root, tmp_path / "mnt", "--read-only", "--layout", "source") as mnt:
        files = files_under(mnt)
        assert "parted/c/1/1" not in files  # not stored
        assert [f for f in files if f.startswith("parted/c/")] == [
            "parted/c/0/0", "parted/c/0/1", "parted/c/0/2", "parted/c/1/0", "parted/c/1/2"]
        assert not any(f.endswith(".crc32c") for f in files)
        assert sorted(f for f in files if f.startswith("flat/")) == [
            "flat/c.0.0", "flat/c.0.1", "flat/c.1.0", "flat/c.1.1", "flat/zarr.json"]
        assert (mnt / "parted/c/0/1").read_bytes() == (
            (root / "parted/c/0/1").read_bytes() + (root / "parted/c/0/1.crc32c").read_bytes())
        shown = json.loads((mnt / "parted/zarr.json").read_text())
        assert "storage_transformers" not in shown
        assert shown["chunk_key_encoding"] == {"name": "default",
                                              "configuration": {"separator": "/"}}
        entry = json.loads((mnt / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
        assert entry["parted"] == shown  # the consolidated copy says what the node says
        # The flat array's document is shown exactly as stored.
        assert (mnt / "flat/zarr.json").read_bytes() == (root / "flat/zarr.json").read_bytes()
        for consolidated in (True, False):
            group = zarr.open_group(mnt, mode="r", use_consolidated=consolidated)
            for name, values in expected.items():
                np.testing.assert_array_equal(group[name][:], values)


def test_source_layout_writes_new_chunks_as_parts(parted_group, tmp_path):
    root, expected = parted_group
    with mounted(root, tmp_path / "mnt", "--layout", "source") as mnt:
        array = zarr.open_array(mnt / "parted", mode="r+")  # plain zarr: no transformer
        array[10:, 10:20] = 5  # the chunk that was not stored
    assert (root / "parted/c/1/1").exists() and (root / "parted/c/1/1.crc32c").exists()
    expected["parted"][10:, 10:20] = 5
    np.testing.assert_array_equal(zarrfuse.open_array(root / "parted")[:], expected["parted"])


@pytest.mark.parametrize("flag", [["--suffix", ".raw"], ["--max-children", "10"],
                                  ["--format", "tiff"]])
def test_source_layout_refuses_fanout_options(parted_group, tmp_path, flag):
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout([*ZARRFUSE, "mount", parted_group[0], tmp_path / "mnt",
                               "--layout", "source", *flag], 30, check=False)
    assert result.returncode != 0
    assert "--layout source" in result.stderr and flag[0] in result.stderr
    assert not os.path.ismount(tmp_path / "mnt")
