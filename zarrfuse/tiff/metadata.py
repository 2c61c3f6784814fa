"""Recognising a dual-access array from its ``zarr.json``: :func:`read_shard_format` says why
not (for the commands), :func:`shard_format_for` is the quiet variant (the chunk finisher)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from zarrfuse.errors import ConfigurationError
from zarrfuse.tiff.compression import CODEC_NAMES, Compression
from zarrfuse.tiff.shard_format import TiffShardFormat, check_geometry

__all__ = ["ATTRIBUTE", "TIFF_SUFFIXES", "read_shard_format", "shard_format_for"]

ATTRIBUTE = "zarrfuse.tiff_shards"  # a name stored in zarr.json: never renamed with modules
"""The attribute that declares an array dual-access: ``{"samples": bool, "bigtiff": bool}``
(``samples``: the last axis holds the samples of a pixel, e.g. RGB)."""
TIFF_SUFFIXES = (".tif", ".tiff")


def _named(codec: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(codec, str):
        return codec, {}
    return codec.get("name", ""), codec.get("configuration") or {}


def _sharding(metadata: dict[str, Any]) -> dict[str, Any]:
    codecs = [_named(c) for c in metadata.get("codecs", [])]
    if [name for name, _ in codecs] != ["sharding_indexed"]:
        raise ConfigurationError(
            f"its codecs are {[n for n, _ in codecs]}, not one sharding_indexed codec"
        )
    config = codecs[0][1]
    if config.get("index_location", "end") != "end":
        raise ConfigurationError("its shard index is at the start; TIFF needs it at the end")
    index_codecs = [_named(c) for c in config.get("index_codecs", [])]
    if [n for n, _ in index_codecs] != ["bytes", "crc32c"] or index_codecs[0][1].get(
        "endian", "little"
    ) != "little":
        raise ConfigurationError(
            "its shard index codecs are not [bytes (little endian), crc32c], zarr's default"
        )
    return config


def _inner_codecs(
    config: dict[str, Any], dtype: np.dtype
) -> tuple[Literal["<", ">"], Compression]:
    """Byte order and tile compression; refuses codecs TIFF readers cannot undo."""
    inner = [_named(c) for c in config.get("codecs", [])]
    names = [n for n, _ in inner]
    known = [["bytes"]] + [["bytes", name] for name in CODEC_NAMES]
    if names not in known:
        raise ConfigurationError(
            f"its inner codecs are {names}; TIFF readers decode only "
            + ", ".join(f"[{', '.join(k)}]" for k in known)
        )
    endian = inner[0][1].get("endian", "little")
    byteorder: Literal["<", ">"] = "<" if endian == "little" or dtype.itemsize == 1 else ">"
    return byteorder, CODEC_NAMES[names[1]] if len(names) == 2 else "none"


def _header_part(metadata: dict[str, Any], shard_format: TiffShardFormat) -> bool:
    """Which of the two arrangements of parts the array uses (header in its own part or not);
    ConfigurationError for any other."""
    transformers = metadata.get("storage_transformers") or []
    entries = [t for t in transformers if t.get("name") == "concat-parts"]
    if len(entries) != 1:
        raise ConfigurationError(f"concat-parts: expected exactly one, found {len(entries)}")
    parts = entries[0].get("configuration", {}).get("parts", [])
    got = [(p.get("key_suffix"), p.get("size")) for p in parts]
    known = {}
    for header_part in (False, True):
        want = dataclasses.replace(shard_format, header_part=header_part).parts
        known[header_part] = [(p["key_suffix"], p.get("size")) for p in want]
        if got == known[header_part]:
            return header_part
    raise ConfigurationError(
        f"its concat-parts parts are {got}, not {known[False]} or {known[True]}"
    )


def _check_suffix(metadata: dict[str, Any]) -> None:
    name, config = _named(metadata.get("chunk_key_encoding", "default"))
    suffix = config.get("suffix", "") if name == "suffix" else ""
    if not suffix.lower().endswith(TIFF_SUFFIXES):
        raise ConfigurationError(
            "its chunk keys do not end in .tif or .tiff (chunk_key_encoding 'suffix')"
        )


def read_shard_format(metadata: dict[str, Any]) -> TiffShardFormat:
    """The shard format of a dual-access array's ``zarr.json``; ConfigurationError saying why
    the array is not dual-access otherwise."""
    if metadata.get("node_type") != "array":
        raise ConfigurationError("it is not an array")
    declared = (metadata.get("attributes") or {}).get(ATTRIBUTE)
    if not isinstance(declared, dict):
        raise ConfigurationError(f"it has no {ATTRIBUTE!r} attribute")
    _check_suffix(metadata)
    config = _sharding(metadata)
    grid = metadata.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    try:
        dtype = np.dtype(metadata.get("data_type"))
    except TypeError as e:
        raise ConfigurationError(f"its data type {metadata.get('data_type')!r}: {e}") from e
    if metadata.get("fill_value") not in (0, 0.0, False, "0"):
        raise ConfigurationError(
            f"its fill value is {metadata.get('fill_value')!r}; TIFF readers show missing "
            "tiles as 0"
        )
    byteorder, compression = _inner_codecs(config, dtype)
    shard_format = TiffShardFormat(
        shape=tuple(metadata["shape"]),
        shard_shape=tuple(grid),
        tile_shape=tuple(config["chunk_shape"]),
        dtype=dtype.newbyteorder(byteorder),
        byteorder=byteorder,
        compression=compression,
        samples=bool(declared.get("samples", False)),
        bigtiff=bool(declared.get("bigtiff", False)),
    )
    check_geometry(shard_format)
    return dataclasses.replace(shard_format, header_part=_header_part(metadata, shard_format))


def shard_format_for(metadata: dict[str, Any]) -> TiffShardFormat | None:
    """The shard format if the array is dual-access, else None (the writes then need no header)."""
    try:
        return read_shard_format(metadata)
    except (ConfigurationError, KeyError, TypeError, ValueError, AttributeError):
        return None

