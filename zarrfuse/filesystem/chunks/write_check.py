"""Checking a chunk before it is stored (would zarr decode it?), by the cheapest exact check
for the array's codecs. Why: docs/performance.md, "The write check"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import google_crc32c
import numpy as np
from zarr.codecs import BytesCodec, Crc32cCodec, TransposeCodec

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.errors import WriteRefusedError
from zarrfuse.extensions.byte_ranges import slice_views
from zarrfuse.limits import MAX_VERIFIED_DECODE
from zarrfuse.zarr_compat import (
    ArrayConfig,
    ArrayV2Metadata,
    ArrayV3Metadata,
    chunk_spec,
    codecs_from_list,
    create_codec_pipeline,
    default_buffer_prototype,
)

__all__ = [
    "ChunkCheck",
    "Crc32cCheck",
    "DecodeCheck",
    "LengthCheck",
    "checker_for",
    "checker_for_document",
]

ArrayMetadata = ArrayV2Metadata | ArrayV3Metadata


class ChunkCheck(Protocol):
    """Raises WriteRefusedError unless a value decodes as its chunk."""

    name: ClassVar[str]
    inline: ClassVar[bool]
    """Cheap enough to run on the event loop; otherwise the caller uses a worker thread."""

    def check(self, coords: tuple[int, ...], views: Sequence[memoryview]) -> None: ...


def _refused(coords: tuple[int, ...], why: str) -> WriteRefusedError:
    return WriteRefusedError(f"chunk {coords} {why}; nothing was written")


@dataclass(frozen=True)
class LengthCheck:
    """Fixed-size codecs: every chunk is exactly ``size`` bytes."""

    size: int
    codecs: str
    name: ClassVar[str] = "length"
    inline: ClassVar[bool] = True

    def check(self, coords: tuple[int, ...], views: Sequence[memoryview]) -> None:
        total = sum(len(v) for v in views)
        if total != self.size:
            raise _refused(coords, f"is {total} bytes; the array's codecs ({self.codecs}) "
                                   f"make every chunk exactly {self.size} bytes")


@dataclass(frozen=True)
class Crc32cCheck:
    """Fixed-size codecs then ``crc32c``: the length, and the checksum in the last 4 bytes."""

    size: int
    codecs: str
    name: ClassVar[str] = "crc32c"
    inline: ClassVar[bool] = False

    def check(self, coords: tuple[int, ...], views: Sequence[memoryview]) -> None:
        LengthCheck(self.size, self.codecs).check(coords, views)
        crc = 0
        for view in slice_views(views, 0, self.size - 4):
            crc = google_crc32c.extend(crc, np.frombuffer(view, dtype="u1"))
        stored = b"".join(slice_views(views, self.size - 4, self.size))
        if crc.to_bytes(4, "little") != stored:  # zarr's crc32c codec: little-endian uint32
            raise _refused(coords, f"has crc32c {stored.hex()}, but its bytes sum to "
                                   f"{crc.to_bytes(4, 'little').hex()}")


@dataclass(frozen=True)
class DecodeCheck:
    """Any other codecs: decode the value as a reader would (``api.chunk_decoding``'s
    decoder of whole stored objects, the one "does this decode?" there is)."""

    decoder: SyncChunkDecoder
    codecs: str
    decoded_bytes: int = 0
    """What one chunk decodes to (0: variable-size types, unknown until decoded)."""
    name: ClassVar[str] = "decode"
    inline: ClassVar[bool] = False

    def check(self, coords: tuple[int, ...], views: Sequence[memoryview]) -> None:
        if self.decoded_bytes > MAX_VERIFIED_DECODE:
            raise _refused(coords, f"decodes to {self.decoded_bytes} bytes, more than a write "
                                   f"is decoded to be checked ({MAX_VERIFIED_DECODE}); mount "
                                   "with --no-verify to store such chunks unchecked")
        try:
            self.decoder.decode(b"".join(views))
        except MemoryError:
            raise
        except Exception as e:  # any codec's failure, or a declared size too big: refused
            raise _refused(coords, f"does not decode with the array's codecs ({self.codecs}): "
                                   f"{type(e).__name__}: {e}") from e


def _codec_names(metadata: ArrayMetadata) -> str:
    if isinstance(metadata, ArrayV3Metadata):
        return ", ".join(str(c.to_dict()["name"]) for c in metadata.codecs)
    codecs = [*(metadata.filters or ()), *([metadata.compressor] if metadata.compressor else [])]
    return ", ".join(json.dumps(c.get_config()) for c in codecs) or "no filters or compressor"


def checker_for(metadata: ArrayMetadata) -> ChunkCheck:
    """The cheapest exact check for chunks of an array with this (parsed) metadata."""
    names = _codec_names(metadata)
    native = metadata.dtype.to_native_dtype()
    fixed_dtype = not native.hasobject and native.itemsize > 0
    spec = chunk_spec(metadata, ArrayConfig("C", True), default_buffer_prototype())
    decoded_bytes = int(np.prod(spec.shape, dtype=np.int64)) * native.itemsize

    def decode() -> DecodeCheck:
        return DecodeCheck(SyncChunkDecoder.for_stored_objects(metadata), names,
                           decoded_bytes if fixed_dtype else 0)

    if isinstance(metadata, ArrayV2Metadata):
        if fixed_dtype and not metadata.filters and metadata.compressor is None:
            return LengthCheck(decoded_bytes, names)
        return decode()
    array_array, array_bytes, bytes_bytes = codecs_from_list(metadata.codecs)
    if (
        fixed_dtype
        and all(isinstance(c, TransposeCodec) for c in array_array)
        and isinstance(array_bytes, BytesCodec)
    ):
        pipeline = create_codec_pipeline(metadata)
        if not bytes_bytes:
            return LengthCheck(pipeline.compute_encoded_size(decoded_bytes, spec), names)
        if len(bytes_bytes) == 1 and isinstance(bytes_bytes[0], Crc32cCodec):
            return Crc32cCheck(pipeline.compute_encoded_size(decoded_bytes, spec), names)
    return decode()


def checker_for_document(document: dict[str, Any]) -> ChunkCheck:
    """The check for an array's metadata document (``zarr.json``, or a v2 ``.zarray`` with
    ``zarr_format: 2``), without storage transformers (the mount applies those)."""
    if document.get("zarr_format") == 2:
        return checker_for(ArrayV2Metadata.from_dict(dict(document)))
    shown = {k: v for k, v in document.items() if k != "storage_transformers"}
    return checker_for(ArrayV3Metadata.from_dict(shown))
