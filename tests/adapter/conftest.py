"""The kernel's side of the adapter's tests, one fixture for every module here."""

from __future__ import annotations

import pyfuse3
import pytest

from tests.adapter.test_operations import Kernel


@pytest.fixture
def kernel(monkeypatch) -> Kernel:
    """A stand-in for the kernel (``test_operations.Kernel``): records what the adapter
    replies to readdir and what it tells the kernel to drop."""
    stand_in = Kernel()
    for name in ("readdir_reply", "invalidate_inode", "invalidate_entry"):
        monkeypatch.setattr(pyfuse3, name, getattr(stand_in, name))
    return stand_in
