"""The decoded size a compressed chunk declares in its header, read without decoding."""

from __future__ import annotations

import numcodecs
import pytest

from zarrfuse.api.declared_sizes import (
    blosc_declared_size,
    check_declared_size,
    zstd_declared_size,
)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 300, 65791, 70000, 10**7])
def test_zstd_and_blosc_headers_declare_the_decoded_size(n):
    data = bytes(n)
    assert zstd_declared_size(numcodecs.Zstd(level=1).encode(data)) == n
    assert blosc_declared_size(numcodecs.Blosc().encode(data)) == n


def test_what_is_no_frame_declares_nothing():
    assert zstd_declared_size(b"not zstd at all") is None
    assert blosc_declared_size(b"short") is None


def test_more_than_the_limit_is_refused_and_variable_sizes_are_not_checked():
    frame = numcodecs.Zstd(level=1).encode(bytes(1 << 20))
    check_declared_size(frame, "zstd", 1 << 20)
    with pytest.raises(ValueError, match="declares 1048576 decoded bytes"):
        check_declared_size(frame, "zstd", 4096)
    check_declared_size(frame, "zstd", None)
    check_declared_size(frame, "gzip", 4096)  # declares nothing we trust
