"""A Zarr node as stored: its metadata documents (v3 ``zarr.json``, or v2 ``.zarray``,
``.zgroup``, ``.zattrs``, ``.zmetadata``) and the one form the rest of zarrfuse works with.

Everything downstream (chunk keys, grids, codecs, rendering, verification) reads a v3-shaped
array document. A v2 array gets one, made by zarr-python's own v2 -> v3 conversion: same
codecs (the v2 compressor and filters as v3 codecs, ``order: F`` as a transpose), the ``v2``
chunk key encoding with the array's separator, and, where ``fill_value`` is null, the data
type's default, which is what zarr-python reads for missing chunks of such arrays. So a v2
array reads back identical through either form. Pure: callers hand in the bytes they read.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zarr.codecs import TransposeCodec, VLenBytesCodec, VLenUTF8Codec

from zarrfuse.errors import ConfigurationError, SourceError
from zarrfuse.extensions.chunk_keys import parse_encoding
from zarrfuse.extensions.transformers import parse_storage_transformers
from zarrfuse.zarr_compat import (
    ArrayV2Metadata,
    ArrayV3Metadata,
    V2ChunkKeyEncoding,
    convert_v2_array_metadata,
    convert_v2_compressor,
    convert_v2_filters,
    default_buffer_prototype,
    stored_chunk_shape,
)

__all__ = [
    "V2_NAMES", "V3_NAME", "StoredNode", "parse_array_metadata", "parse_node", "v2_array_as_v3"
]

V3_NAME = "zarr.json"
V2_NAMES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
_VLEN = {"vlen-utf8": VLenUTF8Codec, "vlen-bytes": VLenBytesCodec}
"""v2 object codecs (filters) -> the v3 array-to-bytes codec that writes the same bytes."""


@dataclass(frozen=True)
class StoredNode:
    """One node's stored documents, parsed and checked."""

    zarr_format: Literal[2, 3]
    node_type: Literal["array", "group"]
    raw: Mapping[str, bytes]
    """The documents as stored, by name (``zarr.json``, or the v2 names present)."""
    metadata: dict[str, Any]
    """A v3-shaped document: ``zarr.json`` itself, or the v2 node converted."""

    def document(self, name: str) -> dict[str, Any]:
        """The parsed stored document ``name``."""
        parsed: dict[str, Any] = json.loads(self.raw[name])
        return parsed

    @property
    def attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = self.metadata.get("attributes") or {}
        return attributes

    def consolidated(self) -> dict[str, Any] | None:
        """The consolidated copies this group stores (v3 inline metadata or v2
        ``.zmetadata``), by path relative to the group, as stored; None without any."""
        if self.zarr_format == 3:
            inline = self.metadata.get("consolidated_metadata")
            if not isinstance(inline, dict):
                return None
            entries = inline.get("metadata")
            return dict(entries) if isinstance(entries, dict) else {}
        if ".zmetadata" not in self.raw:
            return None
        entries = self.document(".zmetadata").get("metadata")
        return dict(entries) if isinstance(entries, dict) else {}


def _load(where: str, name: str, raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigurationError(f"{where}/{name} is not valid JSON: {e}") from e
    if not isinstance(document, dict):
        raise ConfigurationError(f"{where}/{name} is not a JSON object")
    return document


def parse_node(where: str, raw: Mapping[str, bytes | None]) -> StoredNode:
    """The node whose stored documents are ``raw`` (name -> bytes, None where absent).

    ``zarr.json`` wins over v2 documents, as in zarr-python. Raises SourceError when there is
    no node at all, ConfigurationError for a document that is malformed or unsupported.
    """
    present = {name: data for name, data in raw.items() if data is not None}
    if V3_NAME in present:
        return _parse_v3(where, present[V3_NAME])
    if ".zarray" in present or ".zgroup" in present:
        return _parse_v2(where, {n: present[n] for n in V2_NAMES if n in present})
    raise SourceError(f"{where}: no zarr.json, .zarray or .zgroup here; not a Zarr array or group")


def _parse_v3(where: str, raw: bytes) -> StoredNode:
    document = _load(where, V3_NAME, raw)
    if document.get("zarr_format") != 3:
        raise ConfigurationError(
            f"{where}/zarr.json: zarr_format is {document.get('zarr_format')!r}, expected 3"
        )
    node_type = document.get("node_type")
    if node_type == "array":
        parse_encoding(document.get("chunk_key_encoding", "default"))
        parse_storage_transformers(document.get("storage_transformers"))
    elif node_type != "group":
        raise ConfigurationError(
            f"{where}/zarr.json: node_type is {node_type!r}, expected 'array' or 'group'"
        )
    return StoredNode(3, node_type, {V3_NAME: raw}, document)


def _parse_v2(where: str, raw: dict[str, bytes]) -> StoredNode:
    documents = {name: _load(where, name, data) for name, data in raw.items()}
    attributes = documents.get(".zattrs", {})
    name = ".zarray" if ".zarray" in documents else ".zgroup"
    if documents[name].get("zarr_format") != 2:
        raise ConfigurationError(
            f"{where}/{name}: zarr_format is {documents[name].get('zarr_format')!r}, expected 2"
        )
    if name == ".zarray":
        return StoredNode(2, "array", raw, v2_array_as_v3(where, documents[name], attributes))
    group = {"zarr_format": 3, "node_type": "group", "attributes": attributes}
    return StoredNode(2, "group", raw, group)


def _variable_length_as_v3(parsed: ArrayV2Metadata, serializer: type) -> ArrayV3Metadata:
    """zarr's conversion for a v2 array of variable-length items: its last filter (the
    object codec) becomes the array-to-bytes codec."""
    codecs: list[Any] = []
    if parsed.order == "F":
        codecs.append(TransposeCodec(order=list(range(len(parsed.shape) - 1, -1, -1))))
    codecs += convert_v2_filters(tuple(parsed.filters or ())[:-1])
    codecs.append(serializer())
    if parsed.compressor is not None:
        codecs.append(convert_v2_compressor(parsed.compressor, parsed.dtype))
    return ArrayV3Metadata(
        shape=parsed.shape,
        data_type=parsed.dtype,
        # As the v3 document says it: zarr 3.4 takes no v2 ChunkGrid object here.
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": list(parsed.chunks)}},
        chunk_key_encoding=V2ChunkKeyEncoding(separator=parsed.dimension_separator),
        fill_value=parsed.fill_value,
        codecs=codecs,
        attributes=parsed.attributes,
        dimension_names=None,
        storage_transformers=None,
    )


def v2_array_as_v3(where: str, zarray: dict[str, Any], attributes: dict[str, Any]
                   ) -> dict[str, Any]:
    """A v2 array's ``.zarray`` (and ``.zattrs``) as the equivalent v3 array document.

    A ``vlen-utf8``/``vlen-bytes`` filter is how v2 serialises variable-length items; in v3
    the same bytes come from the ``vlen-utf8``/``vlen-bytes`` array-to-bytes codec, which
    takes the place of ``bytes`` (zarr's conversion has no such case).
    """
    filters = list(zarray.get("filters") or [])
    serializer = None
    if filters and isinstance(filters[-1], dict) and filters[-1].get("id") in _VLEN:
        serializer = _VLEN[filters.pop()["id"]]
    try:
        parsed = ArrayV2Metadata.from_dict({**zarray, "attributes": attributes})
        if parsed.fill_value is None:  # zarr-python reads missing chunks as the default
            # A numpy scalar of the array's dtype, which zarr accepts as a fill value.
            default: Any = parsed.dtype.default_scalar()
            parsed = dataclasses.replace(parsed, fill_value=default)
        with warnings.catch_warnings():  # numcodecs.* codecs: "not in the v3 specification"
            warnings.simplefilter("ignore")
            converted = (convert_v2_array_metadata(parsed) if serializer is None
                         else _variable_length_as_v3(parsed, serializer))
        encoded = converted.to_buffer_dict(default_buffer_prototype())[V3_NAME]
        document: dict[str, Any] = json.loads(encoded.to_bytes())  # NaN etc. as JSON says
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigurationError(f"{where}/.zarray: unsupported Zarr v2 array: {e}") from e
    document.pop("storage_transformers", None)
    names = attributes.get("_ARRAY_DIMENSIONS")
    if isinstance(names, list) and len(names) == len(document["shape"]):
        document["dimension_names"] = names
    return document


def parse_array_metadata(where: str, metadata: dict[str, Any]) -> ArrayV3Metadata:
    """zarr's reading of a v3-shaped array document (storage transformers left out: zarr
    does not know them), validated by zarr itself; regular chunk grids only.

    Raises ConfigurationError naming the node and, where zarr's own message does not (a
    fill value out of the data type's range), the field.
    """
    shown = {k: v for k, v in metadata.items() if k != "storage_transformers"}
    try:
        parsed = ArrayV3Metadata.from_dict(shown)
        stored_chunk_shape(parsed)  # regular grids only (zarr 3.4 reads rectilinear ones)
        return parsed
    except (ValueError, TypeError, KeyError, OverflowError) as e:
        field = _blamed_field(shown)
        named = f"{field} {shown.get(field)!r}: " if field else ""
        raise ConfigurationError(
            f"{where.rstrip('/') + '/' if where else ''}{V3_NAME}: invalid array metadata: "
            f"{named}{e}"
        ) from e


def _blamed_field(document: dict[str, Any]) -> str | None:
    """``fill_value`` if the document reads with a plain fill value in its place."""
    if "fill_value" not in document:
        return None
    for stand_in in (0, False, ""):
        try:
            ArrayV3Metadata.from_dict({**document, "fill_value": stand_in})
        except (ValueError, TypeError, KeyError, OverflowError):
            continue
        return "fill_value"
    return None
