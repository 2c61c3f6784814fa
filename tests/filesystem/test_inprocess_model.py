"""The model-based test of writing, in process (issue 22 point 3): the state machine of
``tests/write_model.py`` (also run on a real mount by ``tests/fuse/test_mount_model.py``)
drives the ``FileSystem`` a mount would serve, with no kernel and no daemon, so it runs many
more examples."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from zarr.codecs import BytesCodec

import zarrfuse
from tests.inprocess import in_process
from tests.write_model import CHUNKS, PARTS, write_model


@pytest.mark.expect_log(r"refused to store chunk")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
def test_random_operations_match_the_model_in_process(tmp_path, watched):
    """``watched``: the store watch runs, so chunks are kept open between opens and each
    commit must drop its own. 150 examples each: 300 in all, as before there were two."""
    store = tmp_path / "arr"
    zarrfuse.create_array(store, shape=(CHUNKS, 4096), chunks=(1, 4096), dtype="u1",
                          fill_value=0, serializer=BytesCodec(), compressors=None,
                          storage_transformers=PARTS)
    with in_process(str(store), verify=False) as fs:
        if watched:
            fs.watch_starts()
        run_state_machine_as_test(
            write_model(fs, store),
            settings=settings(max_examples=150, stateful_step_count=30, deadline=None,
                              suppress_health_check=list(HealthCheck)),
        )
