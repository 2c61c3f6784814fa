"""What a reader gave back for one array: its values, or the error it raised."""

from __future__ import annotations

import numpy as np


class ReaderError(Exception):
    """An error a reader raised, carried as text (from a subprocess, or caught in-process)."""


def describe(result: object) -> str:
    """One line for an assertion message."""
    if isinstance(result, BaseException):
        return f"error {type(result).__name__}: {str(result)[:300]}"
    assert isinstance(result, np.ndarray)
    return f"array {result.dtype}{list(result.shape)}"


def equal(got: np.ndarray, want: np.ndarray) -> bool:
    """Same shape and values, NaN equal to NaN (readers may differ in byte order)."""
    return got.shape == want.shape and bool(np.array_equal(got, want, equal_nan=want.dtype.kind
                                                           in "fc"))
