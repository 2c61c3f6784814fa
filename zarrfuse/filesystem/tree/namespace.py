"""The mount's names: path <-> node (``nodes``), for every layout and view: lookups and
listings of groups, arrays, fanout, source-layout key and whole-image directories; a node's
size and time. Its inodes are ``inodes``' table."""

from __future__ import annotations

import contextlib

from zarrfuse.errors import NotAChunk, NotFound, ZarrFuseError
from zarrfuse.filesystem.images.image_names import image_node_names
from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.fanout_tree import DirPosition
from zarrfuse.filesystem.tree.inodes import InodeTable
from zarrfuse.filesystem.tree.mounted import ArrayView, GroupView
from zarrfuse.filesystem.tree.nodes import (
    ArrayRoot,
    ChunkFile,
    Entry,
    FanoutDir,
    GroupDir,
    ImageDir,
    ImageFile,
    KeyDir,
    MetadataFile,
    Node,
    ScratchFile,
)
from zarrfuse.storage.base import Stat

__all__ = ["Namespace"]



class Namespace(InodeTable):
    """Resolves names to nodes (and, as an ``InodeTable``, keeps their inodes)."""

    def __init__(self, root: Node, catalog: Catalog) -> None:
        super().__init__(root)
        self.catalog = catalog

    # --- names ---------------------------------------------------------------------------

    @staticmethod
    def fixed_time(node: Node) -> int:
        """The time of a node that has no stored object of its own: that of its array's or
        group's ``zarr.json`` (directories, metadata files, unstored chunks of a rendered
        view). Stable across remounts, and moved only by rewriting the document."""
        if isinstance(node, GroupDir):
            return node.group.metadata_time_ns
        if isinstance(node, MetadataFile):
            return node.owner.metadata_time_ns
        if isinstance(node, ScratchFile):
            return Namespace.fixed_time(node.directory)
        if isinstance(node, ImageDir | ImageFile):
            return node.image.metadata_time_ns
        return node.array.metadata_time_ns

    async def stat(self, node: Node) -> Stat:
        """Current size and time of a node; NotFound if a chunk is no longer stored."""
        if isinstance(node, MetadataFile):
            return Stat(len(node.data), node.owner.metadata_time_ns)
        if isinstance(node, ImageFile):
            return Stat(node.image.size, node.image.metadata_time_ns)
        if not isinstance(node, ChunkFile):
            return Stat(0, self.fixed_time(node))
        return await node.array.files.stat(node.coords)

    async def _file_entry(self, name: str, node: ChunkFile) -> Entry:
        stat = await self.stat(node)
        return Entry(name, node, stat.size, stat.mtime_ns)

    async def lookup(self, parent: Node, name: str) -> Entry:
        """The entry ``name`` in directory ``parent``; NotFound if there is none."""
        if isinstance(parent, GroupDir):
            if name in parent.group.documents:
                document = MetadataFile(parent.group, name)
                return Entry(name, document, len(document.data))
            if self.catalog.whole_images:
                return await self._lookup_image_child(parent.group, name)
            child = await self.catalog.open_child(parent.group.path, name)
            if child is None or isinstance(child, WholeImage):
                raise NotFound(f"{name!r}: no such node")
            node = GroupDir(child) if isinstance(child, GroupView) else ArrayRoot(child)
            return Entry(name, node)
        if isinstance(parent, ImageDir):
            entry = _image_named(parent.image, name)
            if entry is None:
                raise NotFound(f"{name!r}: this mount shows one image, {parent.image.name}")
            return entry
        if isinstance(parent, ArrayRoot):
            array = parent.array
            if name in array.documents:
                document = MetadataFile(array, name)
                return Entry(name, document, len(document.data))
            if array.keys is not None:
                return await self._lookup_key(array, (), name)
            if not array.tree.has_chunks:
                raise NotFound(f"{name!r}: the array has no chunks")
            chunk = self.chunk_named(parent, name)
            if chunk is not None:
                return await self._file_entry(name, chunk)
            if array.tree.grid and name == array.tree.top:
                return Entry(name, FanoutDir(array, array.tree.root))
            raise NotFound(f"{name!r}: not part of the array")
        if isinstance(parent, FanoutDir):
            return await self._lookup_fanout(parent, name)
        if isinstance(parent, KeyDir):
            return await self._lookup_key(parent.array, parent.names, name)
        raise ZarrFuseError(f"{name!r}: parent is not a directory")  # pragma: no cover

    async def _lookup_image_child(self, group: GroupView, name: str) -> Entry:
        """``name`` in a group of a whole-image mount: a subgroup by its own name, an image
        (array or OME-Zarr pyramid) by its file name."""
        for child_name in image_node_names(name):
            child = await self.catalog.open_child(group.path, child_name)
            entry = _image_named(child, name) if isinstance(child, WholeImage) else None
            if entry is not None:
                return entry
        child = await self.catalog.open_child(group.path, name)
        if isinstance(child, GroupView):
            return Entry(name, GroupDir(child))
        raise NotFound(f"{name!r}: no such group or image")

    async def _list_image_group(self, group: GroupView) -> list[Entry]:
        """A group of a whole-image mount: its subgroups, and a file per image; two
        children that would show under one file name show once (the first, by name)."""
        entries: dict[str, Entry] = {}
        for name in await self.catalog.child_names(group.path):
            child = await self.catalog.open_child(group.path, name)
            if isinstance(child, GroupView):
                entries.setdefault(name, Entry(name, GroupDir(child)))
            elif isinstance(child, WholeImage):
                for entry in _image_entries(child):
                    entries.setdefault(entry.name, entry)
        return sorted(entries.values(), key=lambda e: e.name)

    def parent_of(self, chunk: ChunkFile) -> tuple[Node, str]:
        """The directory that shows ``chunk``, and the chunk's name in it."""
        parent, name, _ = self.path_of(chunk)[-1]
        return parent, name

    def path_of(self, chunk: ChunkFile) -> list[tuple[Node, str, Node]]:
        """Each step from the array's root down to ``chunk``: (directory, name, node)."""
        array = chunk.array
        if array.keys is not None:
            names = array.keys.path(chunk.coords)
            key_steps: list[tuple[Node, str, Node]] = []
            parent_dir: Node = ArrayRoot(array)
            for depth, name in enumerate(names[:-1], start=1):
                child_dir = KeyDir(array, names[:depth])
                key_steps.append((parent_dir, name, child_dir))
                parent_dir = child_dir
            key_steps.append((parent_dir, names[-1], chunk))
            return key_steps
        shown = _shown(array, chunk.coords)
        if not shown:
            return [(ArrayRoot(array), _scalar_name(array), chunk)]
        _, *key = array.tree.encoding.encode_chunk_key(shown).split("/")
        *path, name = [array.tree.top, *array.tree.labelled(key)]
        steps: list[tuple[Node, str, Node]] = []
        parent: Node = ArrayRoot(array)
        pos: DirPosition | None = None
        for part in path:
            child = array.tree.root if pos is None else array.tree.child(pos, part)
            assert isinstance(child, DirPosition)
            steps.append((parent, part, FanoutDir(array, child)))
            parent, pos = FanoutDir(array, child), child
        steps.append((parent, name + array.suffix, chunk))
        return steps

    def directory_path(
        self, directory: GroupDir | ArrayRoot | FanoutDir | KeyDir | ImageDir
    ) -> str:
        """A directory's path in the mount ('' for the root), for messages."""
        if isinstance(directory, GroupDir):
            return directory.group.path
        if isinstance(directory, ImageDir):
            return ""
        array = directory.array
        if isinstance(directory, ArrayRoot):
            return array.path
        if isinstance(directory, KeyDir):
            return "/".join(p for p in (array.path, *directory.names) if p)
        # A fanout directory: the path to any chunk below it passes through it.
        pos, tree = directory.pos, array.tree
        first = tree.value_range(pos)[0]
        coords = (*pos.done, first) + (0,) * (len(tree.grid) - len(pos.done) - 1)
        names = [array.path] if array.path else []
        for _, name, node in self.path_of(ChunkFile(array, _full(array, coords))):
            names.append(name)
            if node == directory:
                break
        return "/".join(names)

    def chunk_named(self, parent: Node, name: str) -> ChunkFile | None:
        """The chunk file ``name`` would be in ``parent`` (stored or not), None if the name
        is not chunk-like there; NotAChunk if it is chunk-like but outside the grid."""
        if isinstance(parent, ArrayRoot | KeyDir) and parent.array.keys is not None:
            names = parent.names if isinstance(parent, KeyDir) else ()
            coords = parent.array.keys.chunk_at((*names, name))
            return None if coords is None else ChunkFile(parent.array, coords)
        if isinstance(parent, ArrayRoot):
            array = parent.array
            if not array.tree.grid and name == _scalar_name(array):
                return ChunkFile(array, _full(array, ()))
            return None
        if not isinstance(parent, FanoutDir) or not parent.array.tree.is_leaf(parent.pos):
            return None
        array, pos = parent.array, parent.pos
        if not name.endswith(array.suffix):
            return None
        stem = name[: len(name) - len(array.suffix)] if array.suffix else name
        if not array.tree.is_file_stem(stem):
            return None
        coordinate = array.tree.child(pos, stem)
        if not isinstance(coordinate, int):
            raise NotAChunk(f"{name!r} is not a chunk of the grid in this directory")
        return ChunkFile(array, _full(array, (*pos.done, coordinate)))

    async def _lookup_fanout(self, parent: FanoutDir, name: str) -> Entry:
        array, pos = parent.array, parent.pos
        if array.tree.is_leaf(pos):
            try:
                chunk = self.chunk_named(parent, name)
            except NotAChunk:
                chunk = None
            if chunk is None:
                raise NotFound(f"{name!r}: not a chunk of the grid")
            return await self._file_entry(name, chunk)
        child = array.tree.child(pos, name)
        if not isinstance(child, DirPosition):
            raise NotFound(f"{name!r}: not a directory of the grid")
        return Entry(name, FanoutDir(array, child))

    async def _lookup_key(self, array: ArrayView, names: tuple[str, ...], name: str) -> Entry:
        """``name`` in a directory of the array's own keys (source layout)."""
        assert array.keys is not None
        path = (*names, name)
        if array.keys.is_directory(path):
            return Entry(name, KeyDir(array, path))
        try:
            coords = array.keys.chunk_at(path)
        except NotAChunk:
            coords = None
        if coords is None:
            raise NotFound(f"{name!r}: not a chunk key of the array")
        return await self._file_entry(name, ChunkFile(array, coords))

    async def _list_keys(self, array: ArrayView, names: tuple[str, ...]) -> list[Entry]:
        """A directory of the array's own keys, as the store lists it."""
        keys = array.keys
        assert keys is not None

        def chunk_at(name: str) -> tuple[int, ...] | None:
            try:
                return keys.chunk_at((*names, name))
            except NotAChunk:
                return None

        subdirs, chunks = await array.stored.listings.listed_keys("/".join(names), chunk_at)
        entries = [
            Entry(name, KeyDir(array, (*names, name)))
            for name in subdirs
            if keys.is_directory((*names, name))
        ]
        entries += [
            Entry(keys.path(coords)[-1], ChunkFile(array, coords), stat.size, stat.mtime_ns)
            for coords, stat in chunks.items()
        ]
        return sorted(entries, key=lambda e: e.name)

    async def list(self, directory: Node) -> list[Entry]:
        """Every entry of a directory, in a stable order."""
        if isinstance(directory, ImageDir):
            return _image_entries(directory.image)
        if isinstance(directory, GroupDir) and self.catalog.whole_images:
            return await self._list_image_group(directory.group)
        if isinstance(directory, GroupDir):
            group = directory.group
            entries = _documents(group)
            for name in await self.catalog.child_names(group.path):
                entries.append(await self.lookup(directory, name))
            return entries
        if isinstance(directory, ArrayRoot):
            array = directory.array
            entries = _documents(array)  # none in rendered views: they are not Zarr arrays
            if array.keys is not None:
                return entries + await self._list_keys(array, ())
            if array.tree.has_chunks and array.tree.grid:
                entries.append(Entry(array.tree.top, FanoutDir(array, array.tree.root)))
            elif array.tree.has_chunks:
                scalar = ChunkFile(array, _full(array, ()))
                with contextlib.suppress(NotFound):
                    entries.append(await self._file_entry(_scalar_name(array), scalar))
            return entries
        if isinstance(directory, FanoutDir):
            array, pos = directory.array, directory.pos
            if not array.tree.is_leaf(pos):
                return [
                    Entry(name, FanoutDir(array, child))
                    for name in await _shown_children(array, pos)
                    if isinstance(child := array.tree.child(pos, name), DirPosition)
                ]
            lo, hi = array.tree.leaf_range(pos)
            stored = await array.files.leaf_stats(pos.done, lo, hi)
            return [
                Entry(
                    array.tree.file_name(pos.done, c) + array.suffix,
                    ChunkFile(array, _full(array, (*pos.done, c))),
                    stat.size,
                    stat.mtime_ns,
                )
                for c, stat in sorted(stored.items())
            ]
        if isinstance(directory, KeyDir):
            return await self._list_keys(directory.array, directory.names)
        raise NotFound("not a directory")


def _image_entry(image: WholeImage) -> Entry:
    return Entry(image.name, ImageFile(image, image.versions.looked_up()), image.size,
                 image.metadata_time_ns)


def _image_entries(image: WholeImage) -> list[Entry]:
    """The files that show one image: the OME-TIFF, and its siblings."""
    return [_image_entry(f) for f in (image, *image.siblings)]


def _image_named(image: WholeImage, name: str) -> Entry | None:
    return next((e for e in _image_entries(image) if e.name == name), None)


def _documents(owner: ArrayView | GroupView) -> list[Entry]:
    return [
        Entry(name, document, len(document.data))
        for name in sorted(owner.documents)
        if (document := MetadataFile(owner, name))
    ]


async def _shown_children(array: ArrayView, pos: DirPosition) -> list[str]:
    """The children of a non-leaf fanout directory that lead to stored chunks (all of them
    where every chunk renders, and on a store that cannot list)."""
    if array.files.every_chunk_exists or not array.stored.listings.can_list:
        return array.tree.child_names(pos)
    names = array.tree.child_names(pos)
    only = array.tree.child(pos, names[0]) if len(names) == 1 else None
    if isinstance(only, DirPosition) and array.tree.is_leaf(only):
        # One group count whose directory is the leaf: it leads to stored chunks if the
        # leaf holds any, which costs what listing the leaf costs (no decoding of names).
        lo, hi = array.tree.leaf_range(only)
        found = await array.stored.listings.stored_stats_between(pos.done, lo, hi, first=True)
        return names if found else []
    stored = await array.stored.listings.index.stored_values(pos.done)
    return array.tree.stored_child_names(pos, stored)


def _full(array: ArrayView, shown: tuple[int, ...]) -> tuple[int, ...]:
    """Grid coordinates from the coordinates a path gives (rendered views leave out the
    dimensions of extent 1: they are 0 there)."""
    return shown if array.shown_dims is None else array.shown_dims.full(shown)


def _shown(array: ArrayView, coords: tuple[int, ...]) -> tuple[int, ...]:
    """The coordinates a chunk's path gives: those of the dimensions the view shows."""
    return coords if array.shown_dims is None else array.shown_dims.shown(coords)


def _scalar_name(array: ArrayView) -> str:
    """The file name of the one chunk of a 0-dimensional array (key ``c`` plus the suffix)."""
    return "c" + array.suffix
