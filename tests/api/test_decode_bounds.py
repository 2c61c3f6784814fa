"""Whether a compressed chunk decodes to more than its chunk can hold, known before a codec
allocates it: declared sizes from headers, streams counted in windows."""

from __future__ import annotations

import bz2
import gzip
import lzma
import resource
import subprocess
import zlib

import numcodecs
import pytest

from zarrfuse.api.decode_bounds import (
    blosc_declared_size,
    check_decoded_size,
    zstd_declared_size,
    zstd_single_frame_end,
)


def zstd_stream(data: bytes) -> bytes:
    """A Zstandard frame that declares no content size, as a streaming writer makes it (the
    zstd tool reading a pipe)."""
    frame = subprocess.run(["zstd", "-c", "-1"], input=data, capture_output=True,
                           check=True).stdout
    assert zstd_declared_size(frame) is None
    return frame


@pytest.mark.parametrize("n", [0, 1, 255, 256, 300, 65791, 70000, 10**7])
def test_zstd_and_blosc_headers_declare_the_decoded_size(n):
    data = bytes(n)
    frame = numcodecs.Zstd(level=1).encode(data)
    assert zstd_declared_size(frame) == n
    assert zstd_single_frame_end(frame) == len(frame)
    assert blosc_declared_size(numcodecs.Blosc().encode(data)) == n


def test_what_is_no_frame_declares_nothing():
    assert zstd_declared_size(b"not zstd at all") is None
    assert zstd_single_frame_end(b"not zstd at all") is None
    assert blosc_declared_size(b"short") is None


def test_more_than_the_limit_is_refused_and_variable_sizes_are_not_checked():
    frame = numcodecs.Zstd(level=1).encode(bytes(1 << 20))
    check_decoded_size(frame, "zstd", 1 << 20)
    with pytest.raises(ValueError, match="declares 1048576 decoded bytes"):
        check_decoded_size(frame, "zstd", 4096)
    check_decoded_size(frame, "zstd", None)
    check_decoded_size(b"what no codec here knows", "crc32c", 1)


STREAMS = {
    "gzip": gzip.compress,
    "numcodecs.gzip": gzip.compress,
    "zlib": zlib.compress,
    "bz2": bz2.compress,
    "lzma": lzma.compress,
    "zstd": zstd_stream,
    "numcodecs.lz4": numcodecs.LZ4().encode,
    "blosc": numcodecs.Blosc().encode,
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_compressor_is_measured_to_the_byte(name):
    n = 3 << 20
    stored = STREAMS[name](bytes(n))
    check_decoded_size(stored, name, n)
    with pytest.raises(ValueError, match="more than the chunk can hold"):
        check_decoded_size(stored, name, n - 1)


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_a_bomb_hidden_after_a_small_first_stream_is_refused(name):
    """gzip members and zstd frames follow one another; the codecs decode all of them."""
    small, big = STREAMS[name](b"tiny"), STREAMS[name](bytes(64 << 20))
    with pytest.raises(ValueError, match="more than the chunk can hold"):
        check_decoded_size(small + big, name, 1 << 20)
    declared = numcodecs.Zstd().encode(b"tiny")  # a declared first frame, then a stream
    with pytest.raises(ValueError):
        check_decoded_size(declared + STREAMS["zstd"](bytes(64 << 20)), "zstd", 1 << 20)


def test_a_stream_bomb_is_measured_in_bounded_memory():
    """A 1 GiB gzip stream is counted, not held: the peak grows by far less than it."""
    packer, zeros = zlib.compressobj(1, wbits=31), bytes(1 << 20)  # 31: a gzip member
    bomb = b"".join(packer.compress(zeros) for _ in range(1024)) + packer.flush()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError):
        check_decoded_size(bomb, "gzip", 256 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 << 10


def test_bytes_that_do_not_decode_are_left_to_the_codec():
    """Truncated or foreign bytes are not called a bomb: the codec's own error says why."""
    for name in ("gzip", "bz2", "lzma", "zstd"):
        check_decoded_size(STREAMS[name](bytes(1000))[:12], name, 1 << 20)
        check_decoded_size(b"\x00" * 32, name, 1 << 20)
