"""What documents a node shows: stored nodes parsed (v3 and v2), consolidated copies rebuilt."""

from __future__ import annotations

import json

import pytest

from zarrfuse.api.nodes import parse_node
from zarrfuse.errors import ConfigurationError, SourceError
from zarrfuse.filesystem.tree.documents import array_documents, group_documents, member_paths

ARRAY = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
         "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
         "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": {"a": 1}}
FANOUT = {"name": "fanout", "configuration": {"max_children": 1000}}


def _v3(document: dict) -> bytes:
    return json.dumps(document).encode()


def test_a_stale_consolidated_entry_shows_the_members_own_document():
    stale = {**ARRAY, "shape": [2]}  # consolidated before the array grew
    group = parse_node("g", {"zarr.json": _v3({
        "zarr_format": 3, "node_type": "group", "attributes": {},
        "consolidated_metadata": {"kind": "inline", "must_understand": False,
                                  "metadata": {"x": stale, "gone": ARRAY}}})})
    assert member_paths(group) == ["gone", "x"]
    x = parse_node("g/x", {"zarr.json": _v3(ARRAY)})
    shown_x = array_documents(x, "fanout", FANOUT)
    shown = group_documents(group, "fanout", {"x": shown_x, "gone": None})
    entries = json.loads(shown["zarr.json"])["consolidated_metadata"]["metadata"]
    assert list(entries) == ["x"]  # a member that is not shown is not listed
    assert entries["x"] == json.loads(shown_x["zarr.json"])
    assert entries["x"]["shape"] == [4] and entries["x"]["chunk_key_encoding"] == FANOUT


def test_fanout_view_drops_storage_transformers_source_layout_keeps_the_rest():
    parts = [{"name": "concat-parts", "configuration": {"parts": [{"key_suffix": ""}]}}]
    node = parse_node("x", {"zarr.json": _v3({**ARRAY, "storage_transformers": parts})})
    fanout = json.loads(array_documents(node, "fanout", FANOUT)["zarr.json"])
    source = json.loads(array_documents(node, "source", FANOUT)["zarr.json"])
    assert "storage_transformers" not in fanout and "storage_transformers" not in source
    assert source == ARRAY
    plain = parse_node("x", {"zarr.json": _v3(ARRAY)})
    assert array_documents(plain, "source", FANOUT) == {"zarr.json": _v3(ARRAY)}  # as stored


def test_v2_group_source_layout_rebuilds_zmetadata_from_the_members():
    zmetadata = {"zarr_consolidated_format": 1, "metadata": {
        ".zgroup": {"zarr_format": 2}, "x/.zarray": {"stale": True}, "x/.zattrs": {},
        "y/.zarray": {"zarr_format": 2}}}
    group = parse_node("g", {".zgroup": b'{"zarr_format": 2}', ".zattrs": None,
                             ".zmetadata": json.dumps(zmetadata).encode()})
    assert group.zarr_format == 2 and member_paths(group) == ["x", "y"]
    zarray = {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "|u1",
              "compressor": None, "filters": None, "fill_value": None, "order": "C"}
    x = parse_node("g/x", {".zarray": json.dumps(zarray).encode(), ".zattrs": b"{}"})
    shown = group_documents(group, "source", {"x": array_documents(x, "source", FANOUT),
                                              "y": None})
    rebuilt = json.loads(shown[".zmetadata"])
    assert rebuilt["zarr_consolidated_format"] == 1
    assert rebuilt["metadata"] == {".zgroup": {"zarr_format": 2}, "x/.zarray": zarray,
                                   "x/.zattrs": {}}
    # In the fanout view the same group is one v3 document, consolidated inline.
    fanout = group_documents(group, "fanout", {"x": array_documents(x, "fanout", FANOUT),
                                               "y": None})
    document = json.loads(fanout["zarr.json"])
    assert document["zarr_format"] == 3 and ".zmetadata" not in fanout
    entry = document["consolidated_metadata"]["metadata"]["x"]
    assert entry["fill_value"] == 0 and entry["chunk_key_encoding"] == FANOUT


def test_v2_conversion_keeps_codecs_order_and_dimension_names():
    zarray = {"zarr_format": 2, "shape": [3, 4], "chunks": [2, 2], "dtype": "<f8",
              "compressor": {"id": "zstd", "level": 3}, "filters": [{"id": "delta",
              "dtype": "<f8"}], "fill_value": "NaN", "order": "F", "dimension_separator": "/"}
    node = parse_node("a", {".zarray": json.dumps(zarray).encode(),
                            ".zattrs": b'{"_ARRAY_DIMENSIONS": ["y", "x"]}'})
    meta = node.metadata
    assert meta["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "/"}}
    assert meta["fill_value"] == "NaN" and meta["dimension_names"] == ["y", "x"]
    assert [c["name"] for c in meta["codecs"]] == ["transpose", "numcodecs.delta", "bytes",
                                                  "zstd"]


@pytest.mark.parametrize(("raw", "error", "text"), [
    ({"zarr.json": None, ".zarray": None, ".zgroup": None}, SourceError, "no zarr.json"),
    ({".zarray": b"[1]"}, ConfigurationError, ".zarray is not a JSON object"),
    ({".zgroup": b'{"zarr_format": 3}'}, ConfigurationError, "expected 2"),
    ({".zarray": b'{"zarr_format": 2, "shape": [1]}'}, ConfigurationError, "unsupported"),
])
def test_bad_documents_say_what_is_wrong(raw, error, text):
    with pytest.raises(error, match=text):
        parse_node("here", raw)
