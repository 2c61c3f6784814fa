"""The metadata documents a node shows, per layout (docs/mounting.md): ``fanout`` shows the
v3 ``zarr.json`` of the view's encoding, ``source`` the stored documents; both without
storage transformers, and with consolidated copies rebuilt from what each member shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from zarrfuse.api.nodes import V3_NAME, StoredNode

__all__ = ["Documents", "Layout", "array_documents", "group_documents", "member_paths"]

Layout = Literal["fanout", "source"]
Documents = dict[str, bytes]
"""Document name (``zarr.json``, ``.zarray``...) -> the bytes shown."""


def _dump(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2).encode()


def array_documents(
    node: StoredNode, layout: Layout, view_encoding: dict[str, Any]
) -> Documents:
    """What an array shows: ``view_encoding`` is the chunk key encoding of the fanout view."""
    if layout == "fanout":
        shown = {k: v for k, v in node.metadata.items() if k != "storage_transformers"}
        shown["chunk_key_encoding"] = view_encoding
        return {V3_NAME: _dump(shown)}
    if node.zarr_format == 2:
        return dict(node.raw)
    stored = node.document(V3_NAME)
    if not stored.get("storage_transformers"):  # absent or [] (zarr-python writes [])
        return dict(node.raw)
    return {V3_NAME: _dump({k: v for k, v in stored.items() if k != "storage_transformers"})}


def group_documents(
    node: StoredNode, layout: Layout, members: Mapping[str, Documents | None] | None
) -> Documents:
    """What a group shows. ``members``: each consolidated member's documents as the mount
    shows them (None: not shown), for a group with consolidated metadata; else None."""
    if node.zarr_format == 2 and layout == "source":
        documents = {name: data for name, data in node.raw.items() if name != ".zmetadata"}
        if members is not None:
            documents[".zmetadata"] = _dump(_v2_consolidated(node, documents, members))
        return documents
    if node.zarr_format == 2:
        shown: dict[str, Any] = dict(node.metadata)
    else:
        shown = node.document(V3_NAME)
        if members is None and layout == "source":
            return dict(node.raw)
    if members is not None:
        shown["consolidated_metadata"] = {
            "kind": "inline",
            "must_understand": False,
            "metadata": _v3_consolidated(node, members),
        }
    return {V3_NAME: _dump(shown)}


def _v3_consolidated(
    node: StoredNode, members: Mapping[str, Documents | None]
) -> dict[str, Any]:
    stored = node.consolidated() or {}
    if node.zarr_format == 2:  # the v2 member paths, from the keys of .zmetadata
        stored = {path: {} for path in _v2_member_paths(stored)}
    entries: dict[str, Any] = {}
    for path, entry in stored.items():
        documents = members.get(path)
        if documents is None or V3_NAME not in documents:
            continue
        shown = json.loads(documents[V3_NAME])
        if isinstance(entry, dict) and "consolidated_metadata" in entry:
            shown["consolidated_metadata"] = entry["consolidated_metadata"]
        elif shown.get("node_type") == "group":
            shown.pop("consolidated_metadata", None)
        entries[path] = shown
    return entries


def member_paths(node: StoredNode) -> list[str] | None:
    """The paths (relative to the group) of its consolidated members; None without
    consolidated metadata."""
    stored = node.consolidated()
    if stored is None:
        return None
    return _v2_member_paths(stored) if node.zarr_format == 2 else sorted(stored)


def _v2_member_paths(entries: Mapping[str, Any]) -> list[str]:
    return sorted({key.rpartition("/")[0] for key in entries if "/" in key})


def _v2_consolidated(
    node: StoredNode, own: Documents, members: Mapping[str, Documents | None]
) -> dict[str, Any]:
    stored = node.consolidated() or {}
    out: dict[str, Any] = {}
    for key, entry in stored.items():
        path, _, name = key.rpartition("/")
        documents = own if not path else members.get(path)
        if documents is None or name not in documents:
            continue
        shown = json.loads(documents[name])
        if isinstance(entry, dict) and "consolidated_metadata" in entry:
            shown["consolidated_metadata"] = entry["consolidated_metadata"]
        out[key] = shown
    document = node.document(".zmetadata")
    return {**document, "metadata": out}
