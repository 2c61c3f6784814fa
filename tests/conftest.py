"""Fixtures shared by all tests; the mount helpers themselves live in tests/mounting.py."""

from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.log_contract import expect_log_fixture, log_contract_fixture  # noqa: F401  (fixtures)
from tests.mounting import mountpoint  # noqa: F401  (a fixture: a fresh directory to mount on)


@pytest.fixture
def array_v3(tmp_path: Path) -> Path:
    """A 4x6 uint8 array in 2x3 chunks (zstd), every chunk stored."""
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(4, 6), chunks=(2, 3), dtype="u1")
    a[:] = np.arange(24, dtype="u1").reshape(4, 6)
    return path


# The fuse marker comes from what a test uses, not from a hand-added mark: a test that
# requests the ``mountpoint`` fixture, or lives in a module that mounts (it imported
# ``mounted`` or the ``ZARRFUSE`` command line), is a FUSE-tier test. ``-m "not fuse"``
# then mounts nothing; CI runs that tier with /dev/fuse hidden to prove it.
_MOUNTING_NAMES = ("mounted", "ZARRFUSE", "daemon_pid", "wait_mounted", "force_unmount")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests import mounting  # noqa: PLC0415  (the helpers whose use makes a test mount)

    helpers = [getattr(mounting, name) for name in _MOUNTING_NAMES]
    for item in items:
        module = getattr(item, "module", None)
        uses = {id(value) for value in vars(module).values()} if module else set()
        if "mountpoint" in getattr(item, "fixturenames", ()) or any(
                id(helper) in uses for helper in helpers):
            item.add_marker(pytest.mark.fuse)
