"""The readers themselves, on the written stores (no mount): each reads what was written.

This is what makes a failure through a mount mean something: a reader that cannot read the
source either is not in the matrix for that array (UNSUPPORTED) or fails here first.
"""

from __future__ import annotations

import numpy as np
import pytest

import zarrfuse
from tests.conformance.expect import assert_reads
from tests.conformance.readers import READERS, Reader
from tests.conformance.results import equal
from tests.conformance.writers import WRITERS

# The first test here may build the plugin-free venv (a minute on a cold pip cache).
pytestmark = pytest.mark.timeout(300)

CELLS = [pytest.param(reader, name, id=f"{reader.name}-{name}")
         for name in WRITERS for reader in READERS if reader.applies(name)]


@pytest.mark.parametrize(("reader", "name"), CELLS)
def test_reader_reads_the_source(reader: Reader, name: str, datasets, read_with) -> None:
    data = datasets[name]
    assert_reads(reader, data, read_with[reader.name](data.root, data), concat_parts=False)


def test_only_zarrfuse_reads_concat_parts_from_the_store(datasets, read_with) -> None:
    data = datasets["v3-concat-parts"]
    assert equal(np.asarray(zarrfuse.open_array(data.root)[...]), data.arrays[""])
    for reader in ("zarr-python+zarrfuse", "zarr-python-plain", "tensorstore", "zarrs"):
        got = read_with[reader](data.root, data)[""]
        assert isinstance(got, BaseException), f"{reader} read a concat-parts store"
