"""The matrix: reader x layout x data set, through real read-only mounts.

``--layout source`` shows the store's own documents and keys (concat-parts assembled,
storage transformers removed): every reader reads every data set, concat-parts included.
The default fanout layout shows zarr.json documents with zarrfuse's fanout encoding: readers
with zarrfuse's plugins read everything; the others must fail with an error, never return
fill values or other data.
"""

from __future__ import annotations

import pytest

from tests.conformance.expect import assert_reads, assert_refuses
from tests.conformance.readers import READERS, Reader
from tests.conformance.writers import WRITERS

# 300 s: the first test may build the plugin-free venv and makes every mount up front.
pytestmark = [pytest.mark.fuse, pytest.mark.timeout(300)]

CELLS = [pytest.param(reader, layout, name, id=f"{reader.name}-{layout}-{name}")
         for name in WRITERS for layout in ("fanout", "source") for reader in READERS
         if reader.applies(name)]


@pytest.fixture(scope="module", autouse=True)
def _mount_what_is_selected(request: pytest.FixtureRequest, mounts) -> None:
    """Every mount the selected tests of this module need, made in parallel up front."""
    keys = {(item.callspec.params["name"], item.callspec.params["layout"])
            for item in request.session.items
            if item.module is request.module and hasattr(item, "callspec")}
    mounts.prepare(keys)


@pytest.mark.parametrize(("reader", "layout", "name"), CELLS)
def test_reader_through_mount(reader: Reader, layout: str, name: str, datasets, mounts,
                              read_with) -> None:
    data = datasets[name]
    mnt = mounts(name, layout)
    results = read_with[reader.name](mnt, data)
    if layout == "source" or reader.knows_fanout:
        assert_reads(reader, data, results, concat_parts=True)
    else:
        assert_refuses(reader, data, results)
