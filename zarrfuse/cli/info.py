"""``zarrfuse info``: what an array or group is, and whether its shards are TIFF files;
for an OME-Zarr image, its axes, channels and levels, and what a mount shows and does
with them (colour, the lower levels after a write).

Reads only metadata documents (``zarr.json``, or Zarr v2's); never a chunk.
"""

from __future__ import annotations

import json
from typing import Any

from zarr.storage import StorePath

from zarrfuse.api.arrays import open_store_path, read_node
from zarrfuse.api.pyramid import method_of
from zarrfuse.errors import ZarrFuseError
from zarrfuse.tiff.compression import TIFF_COMPRESSION
from zarrfuse.tiff.metadata import tiff_layout
from zarrfuse.tiff.ome_zarr import Multiscales, read_multiscales
from zarrfuse.tiff.shard_format import TiffShardFormat
from zarrfuse.zarr_compat import sync

__all__ = ["describe", "dual_access_line"]


def dual_access_line(metadata: dict[str, Any]) -> str:
    """One line: whether the array is dual-access, with its TIFF layout or the reason not."""
    try:
        layout = tiff_layout(metadata)
    except (ZarrFuseError, KeyError, TypeError, ValueError, AttributeError) as e:
        hint = "zarrfuse convert-tiff makes a dual-access copy"
        return f"dual-access (shards are TIFF files): no: {e} ({hint})"
    return f"dual-access (shards are TIFF files): yes: {_summary(layout)}"


def _summary(layout: TiffShardFormat) -> str:
    nlead = len(layout.shape) - (3 if layout.samples else 2)
    tile = layout.tile_shape[nlead : nlead + 2]
    pages = 1
    for n in layout.shard_shape[:nlead]:
        pages *= n
    parts = [
        f"{'BigTIFF' if layout.bigtiff else 'classic TIFF'}",
        "II (little endian)" if layout.byteorder == "<" else "MM (big endian)",
        f"tiles {tile[0]}x{tile[1]}",
        (
            f"{layout.compression} (TIFF compression {TIFF_COMPRESSION[layout.compression]})"
            if layout.compression != "none"
            else "uncompressed"
        ),
        f"{pages} page{'s' if pages != 1 else ''} per file",
        f"{layout.samples_per_pixel} sample{'s' if layout.samples_per_pixel != 1 else ''} "
        "per pixel",
        f"header {layout.header_size} bytes",
        (
            "header in its own part (.header): shard files are TIFFs only when assembled, "
            "e.g. through a zarrfuse mount"
            if layout.header_part
            else "header in the shard file: shard files are TIFFs on disk too"
        ),
    ]
    return ", ".join(parts)


def _hex(color: int) -> str:
    return f"{color & 0xFFFFFFFF:08X}"[:6]


def ome_lines(multiscales: Multiscales) -> list[str]:
    """What an OME-Zarr image is, and what a mount shows and does with it."""
    axes = ", ".join(f"{a.name} ({a.type})" if a.type else a.name for a in multiscales.axes)
    channels = "; ".join(
        name + (f" #{_hex(multiscales.channel_colors[i])}" if multiscales.channel_colors
                else "")
        for i, name in enumerate(multiscales.channel_names)) or "not named"
    colour = ("yes: its channels are red, green, blue (one colour picture in every view)"
              if multiscales.means_colour else
              "no: its channels are shown one by one (--colour always shows 3 or 4 uint8/uint16"
              " channels as colour)")
    method = method_of(multiscales.method)
    if len(multiscales.paths) < 2:
        after = "one level: nothing to update"
    elif method is not None:
        after = (f"recomputed from the written region by {method} "
                 f"(its type {multiscales.method!r})")
    else:
        named = ("it names no method (multiscales type)" if multiscales.method is None
                 else f"its type {multiscales.method!r} is not one zarrfuse recomputes")
        after = (f"stale: {named}; zarrfuse recomputes nearest and mean; the mount's log "
                 "names them at the first write")
    return [
        f"  OME-Zarr {multiscales.version or '(no version)'} image, axes {axes or 'not named'}",
        f"  levels {', '.join(multiscales.paths)} (full resolution first)",
        f"  channels {channels}",
        f"  shown as colour: {colour}",
        f"  lower levels after a write through a writable mount: {after}",
    ]


def _array_lines(where: str, metadata: dict[str, Any], zarr_format: int = 3) -> list[str]:
    codecs = [c.get("name") if isinstance(c, dict) else c for c in metadata.get("codecs", [])]
    chunk_shape = metadata.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    encoding = metadata.get("chunk_key_encoding", "default")
    transformers = metadata.get("storage_transformers") or []
    return [
        f"{where}: Zarr v{zarr_format} array, shape {metadata.get('shape')}, "
        f"{metadata.get('data_type')}",
        f"  chunk shape {chunk_shape}, codecs {codecs}",
        f"  chunk key encoding {json.dumps(encoding)}",
        f"  storage transformers {json.dumps(transformers) if transformers else 'none'}",
        f"  {dual_access_line(metadata)}",
    ]


async def _walk(store_path: StorePath, where: str, lines: list[str]) -> None:
    """Describe the node at ``store_path`` and, for a group, every node below it."""
    node = await read_node(store_path)
    metadata = node.metadata
    if metadata["node_type"] == "array":
        lines.extend(_array_lines(where, metadata, node.zarr_format))
        return
    lines.append(f"{where}: Zarr v{node.zarr_format} group")
    try:
        multiscales = read_multiscales(node.attributes)
    except ZarrFuseError as e:
        lines.append(f"  OME-Zarr metadata not readable: {e}")
        multiscales = None
    if multiscales is not None:
        lines.extend(ome_lines(multiscales))
    prefix = f"{store_path.path}/" if store_path.path else ""
    names = sorted([name async for name in store_path.store.list_dir(prefix)])
    for name in names:
        child = StorePath(store_path.store, f"{prefix}{name}")
        if any([await store_path.store.exists(f"{prefix}{name}/{document}")
                for document in ("zarr.json", ".zarray", ".zgroup")]):
            try:
                await _walk(child, f"{where.rstrip('/')}/{name}", lines)
            except ZarrFuseError as e:
                lines.append(f"{where.rstrip('/')}/{name}: skipped: {e}")


def describe(source: Any, *, storage_options: dict[str, Any] | None = None) -> str:
    """What ``zarrfuse info SOURCE`` prints: the node(s) and their dual-access answer."""
    store_path = sync(open_store_path(source, storage_options=storage_options))
    lines: list[str] = []
    sync(_walk(store_path, str(source), lines))
    return "\n".join(lines) + "\n"
