"""Issue 15's repro: a consolidated group mounted read-only reads as written, through the
consolidated copy and without it; and a rendered view is never mistaken for Zarr."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from tests.conformance.results import describe
from tests.mounting import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")]


@pytest.fixture(scope="module")
def sevens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The issue's group: x, 100x100 f4 in 10x10 chunks, all 7, consolidated."""
    path = tmp_path_factory.mktemp("repro") / "g.zarr"
    g = zarr.open_group(path, mode="w")
    a = g.create_array("x", shape=(100, 100), chunks=(10, 10), dtype="f4")
    a[:] = 7
    zarr.consolidate_metadata(path)
    return path


@pytest.fixture(scope="module")
def sevens_mount(sevens: Path, tmp_path_factory: pytest.TempPathFactory):
    with mounted(sevens, tmp_path_factory.mktemp("repro-mnt") / "mnt", "--read-only") as mnt:
        yield mnt


@pytest.mark.parametrize("use_consolidated", [None, True, False])
def test_consolidated_group_reads_as_written(sevens_mount: Path, use_consolidated) -> None:
    x = zarr.open_group(sevens_mount, mode="r", use_consolidated=use_consolidated)["x"]
    values = np.asarray(x[:])
    assert values.shape == (100, 100)
    assert np.all(values == 7), f"not all 7: {np.unique(values)[:5]} (fill values?)"


def test_consolidated_copy_matches_the_documents_shown(sevens_mount: Path) -> None:
    """What the consolidated copy says of x is what x's own zarr.json in the mount says."""
    group = zarr.open_group(sevens_mount, mode="r", use_consolidated=True)
    consolidated = group.metadata.consolidated_metadata
    assert consolidated is not None
    own = zarr.open_array(sevens_mount / "x", mode="r").metadata
    assert consolidated.metadata["x"].to_dict() == own.to_dict()


@pytest.fixture(scope="module")
def xarray_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, xr.Dataset]:
    ds = xr.Dataset({"v": (("a", "b"), np.arange(60, dtype="f8").reshape(6, 10))},
                    coords={"a": np.arange(6)}, attrs={"note": "repro"})
    path = tmp_path_factory.mktemp("repro-xr") / "ds.zarr"
    ds.to_zarr(path, consolidated=True)
    return path, ds


@pytest.fixture(scope="module")
def xarray_mount(xarray_store, tmp_path_factory: pytest.TempPathFactory):
    with mounted(xarray_store[0], tmp_path_factory.mktemp("xr-mnt") / "mnt", "--read-only") as m:
        yield m


@pytest.mark.parametrize("consolidated", [None, True, False])
def test_xarray_dataset_reads_as_written(xarray_store, xarray_mount, consolidated) -> None:
    xr.testing.assert_identical(
        xr.open_zarr(xarray_mount, consolidated=consolidated).load(), xarray_store[1])


@pytest.fixture(scope="module")
def tiff_view(sevens: Path, tmp_path_factory: pytest.TempPathFactory):
    mnt = tmp_path_factory.mktemp("tiff-mnt") / "mnt"
    with mounted(sevens, mnt, "--read-only", "--format", "tiff") as mnt:
        yield mnt


@pytest.mark.parametrize("open_node", [
    pytest.param(lambda m: zarr.open_group(m, mode="r")["x"][:], id="zarr-group"),
    pytest.param(lambda m: zarr.open_array(m / "x", mode="r")[:], id="zarr-array"),
    pytest.param(lambda m: zarr.open(m, mode="r"), id="zarr-open"),
    pytest.param(lambda m: xr.open_zarr(m).load(), id="xarray"),
    pytest.param(lambda m: xr.open_zarr(m, consolidated=False).load(), id="xarray-listing"),
])
def test_rendered_view_is_not_zarr(tiff_view: Path, open_node) -> None:
    """A TIFF view has no zarr.json: Zarr readers must fail, never read fill values."""
    try:
        got = open_node(tiff_view)
    except Exception:  # noqa: BLE001  (any error is the expected outcome)
        return
    pytest.fail(f"a Zarr reader opened a TIFF view and got {describe(got)}")
