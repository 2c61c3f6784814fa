"""Third-party Zarr readers, each reading the arrays of a data set at a path.

A reader takes a root directory (a source store, or a mount of it) and the array paths in it,
and returns each array's values or the exception it raised: one broken array never hides
what the reader does with the others. Readers go through the group at the root (so through
its consolidated metadata, when there is one) as a user of that library would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from tests.conformance.plain_zarr import PlainZarr
from tests.conformance.writers import DataSet

Result = np.ndarray | BaseException
Results = dict[str, Result]
ReadFunction = Callable[[Path, DataSet], Results]


def _open_zarr_python(root: Path, path: str) -> zarr.Array:
    if path == "":
        return zarr.open_array(root, mode="r")
    node = zarr.open_group(root, mode="r")[path]
    assert isinstance(node, zarr.Array), f"{path} is a {type(node).__name__}"
    return node


def _each(paths: list[str], read: Callable[[str], np.ndarray]) -> Results:
    results: Results = {}
    for path in paths:
        try:
            results[path] = read(path)
        except Exception as e:  # noqa: BLE001  (any error is a result: the tests judge it)
            results[path] = e
    return results


def zarr_with_plugins(root: Path, data: DataSet) -> Results:
    """zarr-python in this process, where zarrfuse's entry points (fanout, suffix) load."""
    return _each(list(data.arrays), lambda p: _open_zarr_python(root, p)[...])


def zarrs(root: Path, data: DataSet) -> Results:
    """zarr-python with zarrs-python's Rust codec pipeline; strict, so an array zarrs cannot
    handle fails instead of falling back to zarr-python's own pipeline."""
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline",
                          "codec_pipeline.strict": True}):
        return _each(list(data.arrays), lambda p: _open_zarr_python(root, p)[...])


def _tensorstore_read(path: Path) -> np.ndarray:
    import tensorstore as ts  # noqa: PLC0415  (a large import; only this reader needs it)

    driver = "zarr3" if (path / "zarr.json").exists() else "zarr"
    spec = {"driver": driver, "kvstore": {"driver": "file", "path": str(path) + "/"}}
    return np.asarray(ts.open(spec, read=True, open=True).result().read().result())


def tensorstore(root: Path, data: DataSet) -> Results:
    """tensorstore's own Zarr drivers (``zarr`` for v2 documents, ``zarr3`` for zarr.json)
    on its ``file`` kvstore: no zarr-python at all."""
    return _each(list(data.arrays), lambda p: _tensorstore_read(root / p if p else root))


def make_plain_zarr(server: PlainZarr) -> ReadFunction:
    """zarr-python, same version, in a venv without zarrfuse (see plain_zarr.py)."""
    def plain_zarr(root: Path, data: DataSet) -> Results:
        return dict(server.read(root, list(data.arrays)))
    return plain_zarr


def _xarray(root: Path, data: DataSet, consolidated: bool) -> Results:
    try:
        ds = xr.open_zarr(root, consolidated=consolidated).load()
    except Exception as e:  # noqa: BLE001  (the error is the result)
        return dict.fromkeys(data.arrays, e)
    assert data.dataset is not None
    if ds.attrs != data.dataset.attrs:
        mismatch = AssertionError(f"attrs {ds.attrs} != {data.dataset.attrs}")
        return dict.fromkeys(data.arrays, mismatch)
    return {name: np.asarray(ds[name].values) for name in data.arrays}


def xarray_consolidated(root: Path, data: DataSet) -> Results:
    """``xr.open_zarr(root, consolidated=True)``: the consolidated copy alone."""
    return _xarray(root, data, consolidated=True)


def xarray_listing(root: Path, data: DataSet) -> Results:
    """``xr.open_zarr(root, consolidated=False)``: every node's own document."""
    return _xarray(root, data, consolidated=False)


def ngff_zarr(root: Path, data: DataSet) -> Results:
    """ngff-zarr's reader: the multiscales metadata, then each level's data."""
    import ngff_zarr as nz  # noqa: PLC0415  (slow to import; only OME data sets need it)

    try:
        multiscales = nz.from_ngff_zarr(str(root))
        paths = [d.path for d in multiscales.metadata.datasets]
        if paths != data.ome_levels:
            raise AssertionError(f"levels {paths} != {data.ome_levels}")
        return {p: np.asarray(img.data.compute())
                for p, img in zip(paths, multiscales.images, strict=True)}
    except Exception as e:  # noqa: BLE001  (the error is the result)
        return dict.fromkeys(data.arrays, e)


@dataclass(frozen=True)
class Reader:
    """A reader as the tests see it: which data sets it applies to (by name), and whether it
    knows the fanout encoding (zarrfuse's entry points are loaded in its process)."""

    name: str
    knows_fanout: bool
    applies: Callable[[str], bool] = lambda dataset: True


READERS = [
    Reader("zarr-python+zarrfuse", knows_fanout=True),
    Reader("zarrs", knows_fanout=True),  # zarr-python parses metadata and makes the keys
    Reader("zarr-python-plain", knows_fanout=False),
    Reader("tensorstore", knows_fanout=False),
    Reader("xarray-consolidated", knows_fanout=True, applies=lambda name: "xarray" in name),
    Reader("xarray", knows_fanout=True, applies=lambda name: "xarray" in name),
    # ngff-zarr reads zarr.json through zarrista (Rust), not zarr-python: no fanout there.
    Reader("ngff-zarr", knows_fanout=False, applies=lambda name: name.startswith("ome-")),
]

UNSUPPORTED = {
    ("tensorstore", "v2-zarr-python", "delta_f"): "tensorstore's zarr driver: no v2 filters",
    ("tensorstore", "v2-hand-written", "delta_zstd"): "tensorstore's zarr driver: no v2 filters",
    ("zarrs", "v2-zarr-python", "delta_f"): "zarrs: no Delta filter",
    ("zarrs", "v2-hand-written", "delta_zstd"): "zarrs: no Delta filter",
    ("zarrs", "v2-hand-written", "blosc_nan_slash_f"):
        "zarrs: order F fails ('input array must be a C contiguous array')",
}
"""Arrays a reader cannot read whatever it is given (its own limits, not zarrfuse's): these
must raise or read correctly, never return other values."""


def read_functions(plain: PlainZarr) -> dict[str, ReadFunction]:
    """Each reader's read function by name; ``plain`` is the plugin-free reader process."""
    return {
        "zarr-python+zarrfuse": zarr_with_plugins,
        "zarrs": zarrs,
        "zarr-python-plain": make_plain_zarr(plain),
        "tensorstore": tensorstore,
        "xarray-consolidated": xarray_consolidated,
        "xarray": xarray_listing,
        "ngff-zarr": ngff_zarr,
    }
