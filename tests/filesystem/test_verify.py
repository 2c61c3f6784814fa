"""The chunk check each codec chain gets, and that the cheap checks refuse exactly what a
decode through zarr refuses."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec, TransposeCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import MemoryStore

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.errors import WriteRefusedError
from zarrfuse.filesystem.chunks.write_check import DecodeCheck, checker_for, checker_for_document


def made(**kwargs):
    """The keywords of ``zarr.create_array`` for one case."""
    return kwargs


CASES = {
    "bytes": ("length", made(shape=(2, 64), chunks=(1, 64), dtype="u1", compressors=None)),
    "transpose": ("length", made(shape=(8, 8), chunks=(4, 2), dtype="<u2", compressors=None,
                                 filters=[TransposeCodec(order=(1, 0))])),
    "crc32c": ("crc32c", made(shape=(8, 8), chunks=(4, 4), dtype="f4",
                              compressors=[Crc32cCodec()])),
    "zstd": ("decode", made(shape=(8, 8), chunks=(4, 4), dtype="u1",
                            compressors=[ZstdCodec()])),
    "crc32c after zstd": ("decode", made(shape=(8, 8), chunks=(4, 4), dtype="u1",
                                         compressors=[ZstdCodec(), Crc32cCodec()])),
    "sharded": ("decode", made(shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="u1",
                               compressors=None)),
    "strings": ("decode", made(shape=(4,), chunks=(2,), dtype=str)),
    "v2 uncompressed": ("length", made(shape=(8, 8), chunks=(4, 4), dtype="i8",
                                       compressors=None, zarr_format=2)),
    "v2 zstd": ("decode", made(shape=(8, 8), chunks=(4, 4), dtype="u1", zarr_format=2)),
}


def stored_chunk(**kwargs) -> tuple[zarr.Array, bytes]:
    array = zarr.create_array(MemoryStore(), **kwargs)
    if array.dtype.kind in "OTU":
        array[:] = np.array(["a", "bb", "c", "dd"])
    else:
        array[:] = np.arange(array.size).reshape(array.shape).astype(array.dtype)
    key = array.metadata.encode_chunk_key((0,) * array.ndim)
    value = sync(array.store.get(key, default_buffer_prototype()))
    return array, value.to_bytes()


def refused(check, coords: tuple[int, ...], value: bytes) -> bool:
    try:
        check.check(coords, [memoryview(value[:3]), memoryview(value[3:])])  # pieces, as FUSE
    except WriteRefusedError:
        return True
    return False


@pytest.mark.parametrize("case", CASES)
def test_each_chain_gets_its_cheapest_exact_check(case):
    kind, kwargs = CASES[case]
    array, good = stored_chunk(**kwargs)
    check = checker_for(array.metadata)
    assert check.name == kind
    assert checker_for_document(array.metadata.to_dict()).name == kind
    coords = (0,) * array.ndim
    decode = DecodeCheck(SyncChunkDecoder.for_stored_objects(array.metadata), "")
    values = [good, good + b"\0", good[:-1], b"", b"\0" * len(good),
              good[:-1] + bytes([good[-1] ^ 1]), bytes([good[0] ^ 0x80]) + good[1:]]
    assert not refused(check, coords, good)
    verdicts = [refused(check, coords, v) for v in values]
    assert verdicts == [refused(decode, coords, v) for v in values]  # the same as zarr's
    assert verdicts[1] and verdicts[3]  # one byte too many, nothing at all


def test_refusals_say_why():
    array, good = stored_chunk(**CASES["crc32c"][1])
    with pytest.raises(WriteRefusedError, match=r"chunk \(0, 0\) has crc32c .* sum to .*"):
        checker_for(array.metadata).check((0, 0), [memoryview(good[:-1] + b"\0")])
    array, good = stored_chunk(**CASES["zstd"][1])
    with pytest.raises(WriteRefusedError, match=r"does not decode .*\(bytes, zstd\).*Zstd"):
        checker_for(array.metadata).check((0, 0), [memoryview(b"garbage")])


def test_bytes_codec_endian_and_transpose_change_nothing_in_the_size():
    array, good = stored_chunk(shape=(4, 6), chunks=(4, 6), dtype=">u4", compressors=None,
                               serializer=BytesCodec(endian="big"),
                               filters=[TransposeCodec(order=(1, 0))])
    assert len(good) == 96 and checker_for(array.metadata).size == 96  # type: ignore[attr-defined]


def test_a_chunk_too_large_to_decode_in_memory_is_refused_before_decoding():
    """A 64 GiB chunk of a sparse grid may be stored as a few KiB, but checking it would hold
    64 GiB: refused with the way out named, before any byte is decoded."""
    array = zarr.create_array({}, shape=(1 << 18, 1 << 18), chunks=(1 << 18, 1 << 18),
                              dtype="u1", fill_value=0)
    with pytest.raises(WriteRefusedError, match=r"decodes to 68719476736 bytes.*--no-verify"):
        checker_for(array.metadata).check((0, 0), [memoryview(b"a few KiB")])
