"""Chunk key encodings shared by the chunk key tests, and the spec's fanout algorithm
written out as an independent oracle."""

from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding, SuffixChunkKeyEncoding

DEFAULT = DefaultChunkKeyEncoding()
DEFAULT_DOT = DefaultChunkKeyEncoding(separator=".")
V2 = V2ChunkKeyEncoding()
V2_SLASH = V2ChunkKeyEncoding(separator="/")
FANOUT = FanoutChunkKeyEncoding()
FANOUT_100 = FanoutChunkKeyEncoding(max_children=100)
SUFFIX_X = SuffixChunkKeyEncoding(suffix=".x")
SUFFIX_X_FANOUT = SuffixChunkKeyEncoding(suffix=".x", base_encoding=FANOUT)
SUFFIX_SHARD_V2 = SuffixChunkKeyEncoding(suffix=".shard.zip", base_encoding=V2)


def spec_fanout_key(coords, max_children):
    """The fanout key written straight from the spec's algorithm, as an independent oracle."""
    effective = 1
    while effective * 10 <= max_children:
        effective *= 10
    decimal_len = len(str(effective - 1))
    base = 10**decimal_len
    parts = ["c"]
    for coord in coords:
        chunks = []
        while True:
            coord, low = divmod(coord, base)
            chunks.insert(0, str(low).zfill(decimal_len))
            if coord == 0:
                break
        parts.append(str(len(chunks) - 1))
        parts.extend(chunks)
    return "/".join(parts)
