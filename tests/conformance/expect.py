"""The two verdicts of the tier: a reader read every array right, or refused every array."""

from __future__ import annotations

import numpy as np

from tests.conformance.readers import UNSUPPORTED, Reader, Results
from tests.conformance.results import describe, equal
from tests.conformance.writers import DataSet


def assert_reads(reader: Reader, data: DataSet, results: Results, *,
                 concat_parts: bool) -> None:
    """Every array equal to what was written. Arrays the reader cannot read anywhere
    (UNSUPPORTED) must raise or be right; concat-parts arrays count only with
    ``concat_parts`` (through a mount; in the store only zarrfuse reads them)."""
    wrong = []
    for path, want in data.arrays.items():
        got = results[path]
        if path in data.concat_parts and not concat_parts:
            continue
        right = not isinstance(got, BaseException) and equal(got, want)
        if right or (isinstance(got, BaseException)
                     and (reader.name, data.name, path) in UNSUPPORTED):
            continue
        wrong.append(f"{path or '.'}: {_judge(got, want)}")
    assert not wrong, f"{reader.name} on {data.name}:\n  " + "\n  ".join(wrong)


def assert_refuses(reader: Reader, data: DataSet, results: Results) -> None:
    """Every array raised: a reader that does not know the encoding must not return values
    (fill values, or anything else) for any array."""
    returned = [f"{path or '.'}: {_judge(got, data.arrays[path])}"
                for path, got in results.items() if not isinstance(got, BaseException)]
    assert not returned, (f"{reader.name} on {data.name} returned data instead of an error:\n  "
                          + "\n  ".join(returned))


def _judge(got: object, want: np.ndarray) -> str:
    """What was wrong, naming the silent failure the tier exists to catch."""
    if isinstance(got, BaseException):
        return describe(got)
    assert isinstance(got, np.ndarray)
    if equal(got, want):
        return "read correctly"
    if got.shape == want.shape and got.size and (np.all(got == got.flat[0])
                                                 or np.all(np.isnan(got.astype("f8")))):
        return f"{describe(got)} all {got.flat[0]!r}: fill values, not the data"
    return f"{describe(got)} differs from what was written"
