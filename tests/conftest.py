"""Fixtures shared by all tests; the mount helpers themselves live in tests/mounting.py."""

from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mountpoint  # noqa: F401  (a fixture: a fresh directory to mount on)


@pytest.fixture
def array_v3(tmp_path: Path) -> Path:
    """A 4x6 uint8 array in 2x3 chunks (zstd), every chunk stored."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(4, 6), chunks=(2, 3), dtype="u1")
    a[:] = np.arange(24, dtype="u1").reshape(4, 6)
    return path
