"""``zarrfuse info``: what an array or group is, as a person thinks of an image: axes with
names and sizes, chunk and shard shapes, codecs; for an OME-Zarr image its channels (names,
colours) and levels (shapes), and what a mount shows and does with it. Text, or ``--json``.

Reads metadata documents (``zarr.json``, or Zarr v2's) and lists directories; never a chunk.
Per view, the files a mount shows are counted by the mount's own code (``build_filesystem``
of a read-only mount, never mounted), so the names are a mount's; an array's files are its
grid's size (a rendered view shows every position; the raw view one file per stored chunk,
so there the count is a bound), and only the path to the first file is listed.
"""

from __future__ import annotations

import json
import math
from typing import Any

from zarr.storage import StorePath

from zarrfuse.api.arrays import open_store_path, read_node
from zarrfuse.api.ome_zarr import Multiscales, read_multiscales
from zarrfuse.api.pyramid import method_of
from zarrfuse.errors import ZarrFuseError
from zarrfuse.tiff.compression import TIFF_COMPRESSION
from zarrfuse.tiff.metadata import read_shard_format
from zarrfuse.tiff.shard_format import TiffShardFormat
from zarrfuse.zarr_compat import sync

__all__ = ["describe", "describe_json", "dual_access_line"]

VIEWS = ("raw", "tiff", "png", "npy", "ome-tiff")
"""The ``--format`` values described, in the order shown."""
ROOT_INODE = 1


def dual_access_line(metadata: dict[str, Any]) -> str:
    """One line: whether the array is dual-access, with its TIFF shard format or why not."""
    try:
        shard_format = read_shard_format(metadata)
    except (ZarrFuseError, KeyError, TypeError, ValueError, AttributeError) as e:
        hint = "zarrfuse convert-tiff makes a dual-access copy"
        return f"dual-access (shards are TIFF files): no: {e} ({hint})"
    return f"dual-access (shards are TIFF files): yes: {_summary(shard_format)}"


def _summary(shard: TiffShardFormat) -> str:
    nlead = len(shard.shape) - (3 if shard.samples else 2)
    tile = shard.tile_shape[nlead : nlead + 2]
    pages = math.prod(shard.shard_shape[:nlead])
    samples = shard.samples_per_pixel
    return ", ".join([
        "BigTIFF" if shard.bigtiff else "classic TIFF",
        "II (little endian)" if shard.byteorder == "<" else "MM (big endian)",
        f"tiles {tile[0]}x{tile[1]}",
        f"{shard.compression} (TIFF compression {TIFF_COMPRESSION[shard.compression]})"
        if shard.compression != "none" else "uncompressed",
        f"{pages} page{'s' if pages != 1 else ''} per file",
        f"{samples} sample{'s' if samples != 1 else ''} per pixel",
        f"header {shard.header_size} bytes",
        "header in its own part (.header): shard files are TIFFs only when assembled, e.g. "
        "through a zarrfuse mount" if shard.header_part
        else "header in the shard file: shard files are TIFFs on disk too",
    ])


def _after_a_write(multiscales: Multiscales) -> str:
    method = method_of(multiscales.method)
    if len(multiscales.paths) < 2:
        return "one level: nothing to update"
    if method is not None:
        how = (f"by {method} (its type {multiscales.method!r})" if multiscales.method else
               "as ome-zarr-py makes them (it names no method: ome-zarr-py's default, resize)")
        return f"a write reaches every level: recomputed from the written region {how}"
    return (f"stale: its type {multiscales.method!r} is not one zarrfuse recomputes (nearest, "
            "mean, none named): a write does not reach them; the mount's log names them "
            "at the first write")


def _ome(multiscales: Multiscales, shapes: dict[str, list[int] | None]) -> dict[str, Any]:
    """An OME-Zarr image as ``--json`` gives it (``shapes``: each level's shape)."""
    return {
        "version": multiscales.version,
        "axes": [{"name": a.name, "type": a.type} for a in multiscales.axes],
        "levels": [{"path": p, "shape": shapes.get(p)} for p in multiscales.paths],
        "channels": [
            {"name": name, "color": f"{multiscales.channel_colors[i] & 0xFFFFFFFF:08X}"[:6]
             if multiscales.channel_colors else None}
            for i, name in enumerate(multiscales.channel_names)],
        "shown_as_colour": multiscales.means_colour,
        "lower_levels_after_a_write": _after_a_write(multiscales),
    }


def _hcs(attributes: dict[str, Any]) -> dict[str, Any]:
    """An OME-Zarr HCS plate or well (v0.4 at the top of the attributes, v0.5 under "ome")
    as ``--json`` gives it: a plate's rows, columns, wells and fields per well, a well's
    fields (each an image, described on its own with its channels)."""
    ome = attributes.get("ome")
    meta = ome if isinstance(ome, dict) else attributes
    plate, well = meta.get("plate"), meta.get("well")

    def paths(entries: Any, key: str = "path") -> list[str]:
        return [str(e.get(key)) for e in entries if isinstance(e, dict)] if isinstance(
            entries, list) else []

    if isinstance(plate, dict):
        return {"plate": {"name": plate.get("name"), "rows": paths(plate.get("rows"), "name"),
                          "columns": paths(plate.get("columns"), "name"),
                          "wells": paths(plate.get("wells")),
                          "fields_per_well": plate.get("field_count")}}
    return {"well": {"fields": paths(well.get("images"))}} if isinstance(well, dict) else {}


def _hcs_lines(node: dict[str, Any]) -> list[str]:
    if "well" in node:
        fields = node["well"]["fields"]
        return [f"  HCS well, {len(fields)} field{'s' if len(fields) != 1 else ''} (images "
                f"{', '.join(fields)})"]
    if "plate" not in node:
        return []
    plate = node["plate"]
    count = {key: f"{len(plate[key])} {key} ({', '.join(plate[key])})"
             for key in ("rows", "columns", "wells")}
    fields = plate["fields_per_well"]
    return [f"  HCS plate{' ' + str(plate['name']) if plate['name'] else ''}: "
            f"{count['rows']} x {count['columns']}, {count['wells']}"
            + (f", up to {fields} fields per well" if fields is not None else "")]


def _shape_text(shape: list[int] | None) -> str:
    return "?" if shape is None else " x ".join(map(str, shape))


def ome_lines(ome: dict[str, Any]) -> list[str]:
    """What an OME-Zarr image is, and what a mount shows and does with it."""
    axes = ", ".join(f"{a['name']} ({a['type']})" if a["type"] else a["name"]
                     for a in ome["axes"])
    channels = "; ".join(c["name"] + (f" #{c['color']}" if c["color"] else "")
                         for c in ome["channels"]) or "not named"
    colour = ("yes: its channels are red, green, blue (one colour picture in every view)"
              if ome["shown_as_colour"] else
              "no: its channels are shown one by one (--colour always shows 3 or 4 uint8/uint16"
              " channels as colour)")
    levels = ", ".join(f"{level['path']} ({_shape_text(level['shape'])})"
                       for level in ome["levels"])
    return [
        f"  OME-Zarr {ome['version'] or '(no version)'} image, axes {axes or 'not named'}",
        f"  levels {levels} (full resolution first)",
        f"  channels {channels}",
        f"  shown as colour: {colour}",
        f"  lower levels after a write through a writable mount: "
        f"{ome['lower_levels_after_a_write']}",
    ]


def _array(where: str, metadata: dict[str, Any], zarr_format: int,
           axis_names: list[str] | None) -> dict[str, Any]:
    """An array as ``--json`` gives it."""
    codecs = metadata.get("codecs", [])
    chunk_shape = metadata.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    shape = metadata.get("shape") or []
    names = metadata.get("dimension_names") or axis_names or [None] * len(shape)
    sharding = next((c.get("configuration") or {} for c in codecs
                     if isinstance(c, dict) and c.get("name") == "sharding_indexed"), None)
    inner = sharding.get("codecs", []) if sharding is not None else codecs
    out: dict[str, Any] = {
        "path": where, "node_type": "array", "zarr_format": zarr_format,
        "shape": shape, "data_type": metadata.get("data_type"),
        "axes": [{"name": n, "size": size} for n, size in zip(names, shape, strict=False)],
        "chunk_shape": sharding.get("chunk_shape") if sharding is not None else chunk_shape,
        "shard_shape": chunk_shape if sharding is not None else None,
        "codecs": [c.get("name") if isinstance(c, dict) else c for c in inner],
        "chunk_key_encoding": metadata.get("chunk_key_encoding", "default"),
        "storage_transformers": metadata.get("storage_transformers") or [],
    }
    if "zarrfuse.tiff_shards" in (metadata.get("attributes") or {}):
        out["dual_access"] = dual_access_line(metadata)
    return out


def _array_lines(node: dict[str, Any]) -> list[str]:
    axes = ", ".join(f"{a['name'] or f'dim{i}'} {a['size']}"
                     for i, a in enumerate(node["axes"]))
    grid = (f"chunk shape {node['chunk_shape']} in shards of {node['shard_shape']}"
            if node["shard_shape"] is not None else f"chunk shape {node['chunk_shape']}")
    transformers = node["storage_transformers"]
    lines = [
        f"{node['path']}: Zarr v{node['zarr_format']} array, shape {node['shape']}, "
        f"{node['data_type']}",
        f"  axes {axes or 'none (0-d)'}",
        f"  {grid}, codecs {node['codecs']}",
        f"  chunk key encoding {json.dumps(node['chunk_key_encoding'])}",
        f"  storage transformers {json.dumps(transformers) if transformers else 'none'}",
    ]
    if "dual_access" in node:
        lines.append(f"  {node['dual_access']}")
    return lines


async def _walk(store_path: StorePath, where: str, nodes: list[dict[str, Any]],
                axis_names: list[str] | None = None) -> None:
    """Describe the node at ``store_path`` and, for a group, every node below it."""
    node = await read_node(store_path)
    metadata = node.metadata
    if metadata["node_type"] == "array":
        nodes.append(_array(where, metadata, node.zarr_format, axis_names))
        return
    described: dict[str, Any] = {"path": where, "node_type": "group",
                                 "zarr_format": node.zarr_format, **_hcs(node.attributes)}
    nodes.append(described)
    try:
        multiscales = read_multiscales(node.attributes)
    except ZarrFuseError as e:
        described["ome_error"] = str(e)
        multiscales = None
    prefix = f"{store_path.path}/" if store_path.path else ""
    levels: dict[str, list[int] | None] = {}
    if multiscales is not None:
        for path in multiscales.paths:
            try:
                level = await read_node(StorePath(store_path.store, f"{prefix}{path}"))
                levels[path] = level.metadata.get("shape")
            except ZarrFuseError:
                levels[path] = None
        described["ome"] = _ome(multiscales, levels)
    names = sorted([name async for name in store_path.store.list_dir(prefix)])
    level_axes = ([a.name for a in multiscales.axes] if multiscales is not None
                  and multiscales.axes else None)
    for name in names:
        child = StorePath(store_path.store, f"{prefix}{name}")
        if any([await store_path.store.exists(f"{prefix}{name}/{document}")
                for document in ("zarr.json", ".zarray", ".zgroup")]):
            try:
                await _walk(child, f"{where.rstrip('/')}/{name}", nodes,
                            level_axes if name in levels else None)
            except ZarrFuseError as e:
                nodes.append({"path": f"{where.rstrip('/')}/{name}", "skipped": str(e)})


def survey_views(source: str, storage_options: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every view of ``source`` as ``--json`` gives it: its files (not ``exact``: a bound, the
    raw view shows stored chunks only), or why it is refused; none without the mount extra."""
    try:
        import trio  # noqa: PLC0415  (the mount extra)

        from zarrfuse.fuse.config import MountConfig  # noqa: PLC0415
        from zarrfuse.fuse.mount import build_filesystem  # noqa: PLC0415
    except ImportError:
        return []
    out: list[dict[str, Any]] = []
    for fmt in VIEWS:
        config = MountConfig(source=source, mountpoint="/", format=fmt, read_only=True,
                             storage_options=dict(storage_options or {}))
        try:
            fs, _kind = build_filesystem(config)
        except ZarrFuseError as e:
            out.append({"format": fmt, "refused": str(e)})
            continue
        view: dict[str, Any] = {"format": fmt, "files": 0, "exact": True, "first": None}
        trio.run(_count_files, fs.namespace, fs.namespace.node(ROOT_INODE), "", view)
        out.append(view)
    return out


async def _count_files(namespace: Any, node: Any, prefix: str, view: dict[str, Any]) -> None:
    """Count the files under ``node`` (arrays by arithmetic) and find the first."""
    array = node.in_array()
    if array is not None:  # an array's root: the walk reaches no directory below it
        view["files"] += math.prod(array.tree.grid) if array.tree.has_chunks else 0
        view["exact"] = view["exact"] and array.rendered is not None
        if view["first"] is None:
            view["first"] = await _first_file(namespace, node, prefix)
        return
    for entry in await namespace.list(node):
        path = f"{prefix}{entry.name}"
        if entry.node.is_dir:
            await _count_files(namespace, entry.node, f"{path}/", view)
        elif entry.node != node.document_named(entry.name):
            view["files"] += 1
            view["first"] = view["first"] or path


async def _first_file(namespace: Any, node: Any, prefix: str) -> str | None:
    """The path of the first chunk file in listing order (None: no chunk stored)."""
    while True:
        entries = [e for e in await namespace.list(node)
                   if e.node != node.document_named(e.name)]
        if not entries:
            return None
        entry = entries[0]
        if not entry.node.is_dir:
            return f"{prefix}{entry.name}"
        node, prefix = entry.node, f"{prefix}{entry.name}/"


def _view_line(view: dict[str, Any]) -> str:
    if "refused" in view:
        return f"  {view['format']}: not shown: {view['refused']}"
    files = view["files"]
    count = (f"{files} file{'s' if files != 1 else ''}" if view["exact"]
             else f"up to {files} files (one per stored chunk)")
    first = f", the first {view['first']}" if view["first"] else ", none stored yet"
    return f"  {view['format']}: {count}{first}"


def _nodes(source: Any, storage_options: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The node at ``source`` and every node below it, as ``--json`` gives them."""
    store_path = sync(open_store_path(source, storage_options=storage_options))
    nodes: list[dict[str, Any]] = []
    try:
        sync(_walk(store_path, str(source), nodes))
    finally:
        store_path.store.close()
    return nodes


def describe_json(source: Any, *, storage_options: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """What ``zarrfuse info --json SOURCE`` prints."""
    return {"source": str(source), "nodes": _nodes(source, storage_options),
            "views": survey_views(str(source), storage_options)}


def describe(source: Any, *, storage_options: dict[str, Any] | None = None) -> str:
    """What ``zarrfuse info SOURCE`` prints: the nodes, then what each view shows."""
    described = describe_json(source, storage_options=storage_options)
    lines: list[str] = []
    for node in described["nodes"]:
        if "skipped" in node:
            lines.append(f"{node['path']}: skipped: {node['skipped']}")
        elif node["node_type"] == "array":
            lines.extend(_array_lines(node))
        else:
            lines.append(f"{node['path']}: Zarr v{node['zarr_format']} group")
            lines.extend(_hcs_lines(node))
            if "ome_error" in node:
                lines.append(f"  OME-Zarr metadata not readable: {node['ome_error']}")
            if "ome" in node:
                lines.extend(ome_lines(node["ome"]))
    if described["views"]:
        lines.append("what a mount shows (zarrfuse mount SOURCE MNT --format ...):")
        lines.extend(_view_line(view) for view in described["views"])
    else:
        lines.append("what a mount shows: needs the mount extra (pip install 'zarrfuse[mount]')")
    return "\n".join(lines) + "\n"
