"""The nodes of the mount's tree, one class per kind, each a value owning its behaviour
(docs/contributing.md, 'Nodes and handles').
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol, cast

from zarrfuse.errors import NotAChunk, NotADirectory, NotFound, NotPermitted, ZarrFuseError
from zarrfuse.filesystem.images.image_names import image_file_name, image_node_names, sibling_name
from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.fanout_tree import DirPosition
from zarrfuse.filesystem.tree.mounted import ArrayView, GroupView
from zarrfuse.storage.base import Stat

__all__ = [
    "METADATA_NAME",
    "ArrayRoot",
    "ChunkFile",
    "Entry",
    "FanoutDir",
    "FileRequests",
    "GroupDir",
    "ImageDir",
    "ImageFile",
    "KeyDir",
    "MetadataFile",
    "Node",
    "ScratchFile",
]

METADATA_NAME = "zarr.json"


class FileRequests(Protocol):
    """The request layer's part of the requests on a file's bytes, one per kind of file
    (``filesystem.fs``)."""

    async def open_chunk(self, node: ChunkFile, inode: int, flags: int, pid: int | None
                         ) -> int: ...
    def open_document(self, node: MetadataFile, flags: int) -> int: ...
    def open_image(self, node: ImageFile, flags: int) -> int: ...
    def open_scratch(self, node: ScratchFile, flags: int) -> int: ...
    async def truncate_chunk(self, node: ChunkFile, size: int) -> None: ...
    async def truncate_scratch(self, node: ScratchFile, size: int) -> None: ...


class Node(ABC):
    """What every kind answers; the defaults are a file's that the mount only shows."""

    is_dir: ClassVar[bool] = False
    shown_read_only: ClassVar[bool] = False  # whatever the mount (documents, whole images)
    followed: ClassVar[bool] = False  # every change reaches the kernel while the watch runs
    comes_and_goes: ClassVar[bool] = False
    """Writers make and remove it (chunks, scratch files): gone since the kernel looked it
    up, the kernel's inode of it is stale, and the name is looked up again."""
    renamed_by_changes: ClassVar[bool] = False
    """A change gives its name a new inode the kernel is not told of (a whole image's
    version): the kernel keeps no entry of the name, and looks it up at each open."""

    def in_array(self) -> ArrayView | None:
        """The array the node belongs to (None: a group's, a whole image's)."""
        return None

    @abstractmethod
    def fixed_time(self) -> int:
        """The time of a node that has no stored object of its own: that of its array's or
        group's ``zarr.json`` (stable across remounts, moved only by rewriting it)."""

    async def stat(self) -> Stat:
        """Current size and time; NotFound if the node is no longer stored."""
        return Stat(0, self.fixed_time())

    def view(self) -> ArrayView | WholeImage | None:
        """The array or image the node shows whole (a mount's root), if it does."""
        return None

    # --- directories ---------------------------------------------------------------------

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        """The entry ``name`` in this directory; NotFound if there is none."""
        raise NotADirectory("not a directory")

    async def children(self, catalog: Catalog) -> list[Entry]:
        """Every entry of this directory, in a stable order."""
        raise NotADirectory("not a directory")

    def chunk_named(self, name: str) -> ChunkFile | None:
        """The chunk file ``name`` would be here (stored or not), None if the name is not
        chunk-like; NotAChunk if it is chunk-like but outside the grid."""
        return None

    def document_named(self, name: str) -> MetadataFile | None:
        """The metadata document ``name`` this directory shows, if it shows one."""
        return None

    def path(self) -> str:
        """A directory's path in the mount, for messages."""
        return ""

    # --- files ---------------------------------------------------------------------------

    async def open(self, fs: FileRequests, inode: int, flags: int, pid: int | None) -> int:
        raise ZarrFuseError(f"inode {inode} is a directory")  # the kernel never asks this

    async def truncate(self, fs: FileRequests, size: int) -> None:
        raise NotPermitted("only chunk files and scratch files can be truncated")

    async def delete(self, name: str) -> None:
        """What unlink does to the stored tree."""
        raise NotPermitted(f"{name!r} is shown by the mount and cannot be removed")

    async def set_stored_time(self, mtime_ns: int) -> bool:
        """Store a time set on the node; False: the store cannot keep it."""
        return False


class Entry(NamedTuple):
    """A named node and, for files, its size and time (None: the node's fixed time). A
    tuple: one is built per file listed, at a third of a frozen dataclass's cost."""

    name: str
    node: Node
    size: int = 0
    mtime_ns: int | None = None


class _Directory(Node):
    is_dir = True

    async def delete(self, name: str) -> None:
        raise NotPermitted(f"{name!r} is a directory")


@dataclass(frozen=True)
class GroupDir(_Directory):
    group: GroupView

    def fixed_time(self) -> int:
        return self.group.metadata_time_ns

    def document_named(self, name: str) -> MetadataFile | None:
        return MetadataFile(self.group, name) if name in self.group.documents else None

    def path(self) -> str:
        return self.group.path

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        document = self.document_named(name)
        if document is not None:
            return document.entry()
        if catalog.whole_images:
            return await self._lookup_image_child(name, catalog)
        child = await catalog.open_child(self.group.path, name)
        if child is None or isinstance(child, WholeImage):
            raise NotFound(f"{name!r}: no such node")
        node = GroupDir(child) if isinstance(child, GroupView) else ArrayRoot(child)
        return Entry(name, node)

    async def _lookup_image_child(self, name: str, catalog: Catalog) -> Entry:
        """``name`` in a group of a whole-image mount: a subgroup by its own name, an image
        (array or OME-Zarr pyramid) by its file name."""
        for child_name in image_node_names(name):
            child = await catalog.open_child(self.group.path, child_name)
            entry = _image_named(child, name) if isinstance(child, WholeImage) else (
                await _well_picture(child, catalog) if isinstance(child, GroupView) else None)
            if entry is not None and entry.name == name:
                return entry
        child = await catalog.open_child(self.group.path, name)
        if isinstance(child, GroupView):
            return Entry(name, GroupDir(child))
        raise NotFound(f"{name!r}: no such group or image")

    async def children(self, catalog: Catalog) -> list[Entry]:
        if not catalog.whole_images:
            entries = _documents(self.group)
            for name in await catalog.child_names(self.group.path):
                entries.append(await self.lookup(name, catalog))
            return entries
        # A whole-image mount: subgroups, and a file per image; two children that would
        # show under one file name show once (the first, by name).
        found: dict[str, Entry] = {}
        for name in await catalog.child_names(self.group.path):
            child = await catalog.open_child(self.group.path, name)
            if isinstance(child, GroupView):
                found.setdefault(name, Entry(name, GroupDir(child)))
                if (picture := await _well_picture(child, catalog)) is not None:
                    found.setdefault(picture.name, picture)
            elif isinstance(child, WholeImage):
                for entry in _image_entries(child):
                    found.setdefault(entry.name, entry)
        return sorted(found.values(), key=lambda e: e.name)


@dataclass(frozen=True)
class ImageDir(_Directory):
    """The root of a whole-image mount of one array (or OME-Zarr image): its file."""

    image: WholeImage
    shown_read_only = True

    def fixed_time(self) -> int:
        return self.image.metadata_time_ns

    def view(self) -> WholeImage:
        return self.image

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        entry = _image_named(self.image, name)
        if entry is None:
            raise NotFound(f"{name!r}: this mount shows one image, {self.image.name}")
        return entry

    async def children(self, catalog: Catalog) -> list[Entry]:
        return _image_entries(self.image)


@dataclass(frozen=True)
class _OfArray(Node):
    """A node of an array (its directories and chunk files), timed by its metadata."""

    array: ArrayView

    def in_array(self) -> ArrayView:
        return self.array

    def fixed_time(self) -> int:
        return self.array.metadata_time_ns


class _ArrayDir(_OfArray, _Directory):
    """A directory of an array: its root, a fanout or a key directory."""

    async def _chunk_entry(self, name: str, what: str) -> Entry:
        """The entry of the chunk file ``name`` here; NotFound (``what`` it is not) else."""
        try:
            chunk = self.chunk_named(name)
        except NotAChunk:
            chunk = None
        if chunk is None:
            raise NotFound(f"{name!r}: not {what}")
        return await chunk.entry(name)


@dataclass(frozen=True)
class ArrayRoot(_ArrayDir):
    def view(self) -> ArrayView:
        return self.array

    def document_named(self, name: str) -> MetadataFile | None:
        return MetadataFile(self.array, name) if name in self.array.documents else None

    def path(self) -> str:
        return self.array.path

    def chunk_named(self, name: str) -> ChunkFile | None:
        array = self.array
        if array.keys is not None:
            coords = array.keys.chunk_at((name,))
            return None if coords is None else ChunkFile(array, coords)
        if not array.tree.grid and name == _scalar_name(array):
            return ChunkFile(array, _full(array, ()))
        return None

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        array = self.array
        document = self.document_named(name)
        if document is not None:
            return document.entry()
        if array.keys is not None:
            return await KeyDir(array, ()).lookup(name, catalog)
        if not array.tree.has_chunks:
            raise NotFound(f"{name!r}: the array has no chunks")
        chunk = self.chunk_named(name)
        if chunk is not None:
            return await chunk.entry(name)
        if array.tree.grid and name == array.tree.top:
            return Entry(name, FanoutDir(array, array.tree.root))
        raise NotFound(f"{name!r}: not part of the array")

    async def children(self, catalog: Catalog) -> list[Entry]:
        array = self.array
        entries = _documents(array)  # none in rendered views: they are not Zarr arrays
        if array.keys is not None:
            return entries + await KeyDir(array, ()).children(catalog)
        if array.tree.has_chunks and array.tree.grid:
            entries.append(Entry(array.tree.top, FanoutDir(array, array.tree.root)))
        elif array.tree.has_chunks:
            scalar = ChunkFile(array, _full(array, ()))
            with contextlib.suppress(NotFound):
                entries.append(await scalar.entry(_scalar_name(array)))
        return entries


@dataclass(frozen=True)
class FanoutDir(_ArrayDir):
    pos: DirPosition
    followed = True

    def path(self) -> str:
        # The path to any chunk below it passes through it.
        array, pos, tree = self.array, self.pos, self.array.tree
        first = tree.value_range(pos)[0]
        coords = (*pos.done, first) + (0,) * (len(tree.grid) - len(pos.done) - 1)
        names = [array.path] if array.path else []
        for _, name, node in ChunkFile(array, _full(array, coords)).steps():
            names.append(name)
            if node == self:
                break
        return "/".join(names)

    def chunk_named(self, name: str) -> ChunkFile | None:
        array, pos = self.array, self.pos
        if not array.tree.is_leaf(pos) or not name.endswith(array.suffix):
            return None
        stem = name[: len(name) - len(array.suffix)] if array.suffix else name
        if not array.tree.is_file_stem(stem):
            return None
        coordinate = array.tree.child(pos, stem)
        if not isinstance(coordinate, int):
            raise NotAChunk(f"{name!r} is not a chunk of the grid in this directory")
        return ChunkFile(array, _full(array, (*pos.done, coordinate)))

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        array, pos = self.array, self.pos
        if array.tree.is_leaf(pos):
            return await self._chunk_entry(name, "a chunk of the grid")
        child = array.tree.child(pos, name)
        if not isinstance(child, DirPosition):
            raise NotFound(f"{name!r}: not a directory of the grid")
        return Entry(name, FanoutDir(array, child))

    async def children(self, catalog: Catalog) -> list[Entry]:
        array, pos = self.array, self.pos
        if not array.tree.is_leaf(pos):
            return [
                Entry(name, FanoutDir(array, child))
                for name in await _shown_children(array, pos)
                if isinstance(child := array.tree.child(pos, name), DirPosition)
            ]
        lo, hi = array.tree.leaf_range(pos)
        stored = await array.files.leaf_stats(pos.done, lo, hi)
        named, suffix, done = array.tree.file_name, array.suffix, pos.done
        return [Entry(named(done, c) + suffix, ChunkFile(array, _full(array, (*done, c))),
                      stat.size, stat.mtime_ns) for c, stat in sorted(stored.items())]


@dataclass(frozen=True)
class KeyDir(_ArrayDir):
    """A directory of an array's own keys (source layout): the names below the array, as
    the store lists them."""

    names: tuple[str, ...]

    def path(self) -> str:
        return "/".join(p for p in (self.array.path, *self.names) if p)

    def chunk_named(self, name: str) -> ChunkFile | None:
        assert self.array.keys is not None
        coords = self.array.keys.chunk_at((*self.names, name))
        return None if coords is None else ChunkFile(self.array, coords)

    async def lookup(self, name: str, catalog: Catalog) -> Entry:
        keys, path = self.array.keys, (*self.names, name)
        assert keys is not None
        if keys.is_directory(path):
            return Entry(name, KeyDir(self.array, path))
        return await self._chunk_entry(name, "a chunk key of the array")

    async def children(self, catalog: Catalog) -> list[Entry]:
        array, names, keys = self.array, self.names, self.array.keys
        assert keys is not None

        def chunk_at(name: str) -> tuple[int, ...] | None:
            try:
                return keys.chunk_at((*names, name))
            except NotAChunk:
                return None

        subdirs, chunks = await array.stored.listings.listed_keys("/".join(names), chunk_at)
        entries = [Entry(name, KeyDir(array, (*names, name)))
                   for name in subdirs if keys.is_directory((*names, name))]
        entries += [
            Entry(keys.path(coords)[-1], ChunkFile(array, coords), stat.size, stat.mtime_ns)
            for coords, stat in chunks.items()
        ]
        return sorted(entries, key=lambda e: e.name)


@dataclass(frozen=True)
class ChunkFile(_OfArray):
    coords: tuple[int, ...]
    followed = True
    comes_and_goes = True

    def __hash__(self) -> int:  # the coordinates alone: each file listed is hashed thrice
        return hash(self.coords)

    async def stat(self) -> Stat:
        return await self.array.files.stat(self.coords)

    async def entry(self, name: str) -> Entry:
        stat = await self.stat()
        return Entry(name, self, stat.size, stat.mtime_ns)

    async def open(self, fs: FileRequests, inode: int, flags: int, pid: int | None) -> int:
        return await fs.open_chunk(self, inode, flags, pid)

    async def truncate(self, fs: FileRequests, size: int) -> None:
        await fs.truncate_chunk(self, size)

    async def delete(self, name: str) -> None:
        await self.array.files.delete(self.coords)

    async def set_stored_time(self, mtime_ns: int) -> bool:
        return await self.array.files.set_time(self.coords, mtime_ns)

    def parent(self) -> tuple[Node, str]:
        """The directory that shows the chunk, and the chunk's name in it."""
        parent, name, _ = self.steps()[-1]
        return parent, name

    def steps(self) -> list[tuple[Node, str, Node]]:
        """Each step from the array's root down to the chunk: (directory, name, node)."""
        array = self.array
        steps: list[tuple[Node, str, Node]] = []
        parent: Node = ArrayRoot(array)
        if array.keys is not None:
            names = array.keys.path(self.coords)
            for depth, name in enumerate(names[:-1], start=1):
                steps.append((parent, name, parent := KeyDir(array, names[:depth])))
            return [*steps, (parent, names[-1], self)]
        shown = self.coords if array.shown_dims is None else array.shown_dims.shown(self.coords)
        if not shown:
            return [(parent, _scalar_name(array), self)]
        _, *key = array.tree.encoding.encode_chunk_key(shown).split("/")
        *path, name = [array.tree.top, *array.tree.labelled(key)]
        pos: DirPosition | None = None
        for part in path:
            child = array.tree.root if pos is None else array.tree.child(pos, part)
            assert isinstance(child, DirPosition)
            steps.append((parent, part, parent := FanoutDir(array, child)))
            pos = child
        return [*steps, (parent, name + array.suffix, self)]


@dataclass(frozen=True)
class ScratchFile(Node):
    """A temporary file (an editor's or rsync's) held by the daemon, never stored
    (``writes.scratch``)."""

    directory: Node
    name: str
    comes_and_goes = True

    def in_array(self) -> ArrayView | None:
        return self.directory.in_array()

    def fixed_time(self) -> int:
        return self.directory.fixed_time()

    async def stat(self) -> Stat:
        raise NotFound(f"scratch file {self.name!r} is gone")  # the area holds it while not

    async def open(self, fs: FileRequests, inode: int, flags: int, pid: int | None) -> int:
        return fs.open_scratch(self, flags)

    async def truncate(self, fs: FileRequests, size: int) -> None:
        await fs.truncate_scratch(self, size)


@dataclass(frozen=True)
class ImageFile(Node):
    """A whole array (or OME-Zarr pyramid) as one OME-TIFF file: one inode per version of
    the image (``image_versions``)."""

    image: WholeImage
    version: int = 0
    shown_read_only = True
    renamed_by_changes = True

    def fixed_time(self) -> int:
        return self.image.metadata_time_ns

    async def stat(self) -> Stat:
        return Stat(self.image.size, self.image.metadata_time_ns)

    async def open(self, fs: FileRequests, inode: int, flags: int, pid: int | None) -> int:
        return fs.open_image(self, flags)


@dataclass(frozen=True)
class MetadataFile(Node):
    """A metadata document the node shows (``zarr.json``, ``.zarray``, ...)."""

    owner: ArrayView | GroupView
    name: str = METADATA_NAME
    shown_read_only = True

    @property
    def data(self) -> bytes:
        return self.owner.documents[self.name]

    def fixed_time(self) -> int:
        return self.owner.metadata_time_ns

    async def stat(self) -> Stat:
        return Stat(len(self.data), self.owner.metadata_time_ns)

    def entry(self) -> Entry:
        return Entry(self.name, self, len(self.data))

    async def open(self, fs: FileRequests, inode: int, flags: int, pid: int | None) -> int:
        return fs.open_document(self, flags)


def _image_entries(image: WholeImage) -> list[Entry]:
    """The files that show one image: the OME-TIFF, and its siblings."""
    return [_image_entry(f) for f in (image, *image.siblings)]


def _image_named(image: WholeImage, name: str) -> Entry | None:
    """Only the file asked for is sized: a preview's size costs a PNG encoding (and, the
    first time, Pillow's plugins imported): 11 ms of a fresh mount's first ``open``."""
    return next((_image_entry(f) for f in (image, *image.siblings) if f.name == name), None)


def _image_entry(f: WholeImage) -> Entry:
    return Entry(f.name, ImageFile(f, f.versions.looked_up()), f.size, f.metadata_time_ns)


async def _well_picture(group: GroupView, catalog: Catalog) -> Entry | None:
    """An HCS well's picture beside its folder (``1.preview.png``): its first field's
    preview, the same file."""
    field = await catalog.open_child(group.path, group.field) if group.field else None
    entry = _image_named(field, sibling_name(field.name, ".preview.png")) if isinstance(
        field, WholeImage) else None
    picture = sibling_name(image_file_name(group.path), ".preview.png")
    return None if entry is None else entry._replace(name=picture)


def _documents(owner: ArrayView | GroupView) -> list[Entry]:
    return [MetadataFile(owner, name).entry() for name in sorted(owner.documents)]


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
    tree, listings = array.tree, array.stored.listings
    # The last coordinate, densely stored: each name looked up in the listing, not decoded.
    # Otherwise (sparse): what is stored, decoded once.
    if len(pos.done) == len(tree.grid) - 1 and await listings.listed_densely(
            pos.done, *tree.value_range(pos)):
        return [name for name in names if await listings.any_listed(
            pos.done, *tree.value_range(cast(DirPosition, tree.child(pos, name))))]
    stored = await listings.stored.values(pos.done)
    return tree.stored_child_names(pos, stored)


def _full(array: ArrayView, shown: tuple[int, ...]) -> tuple[int, ...]:
    """Grid coordinates from the coordinates a path gives (rendered views leave out the
    dimensions of extent 1: they are 0 there)."""
    return shown if array.shown_dims is None else array.shown_dims.full(shown)


def _scalar_name(array: ArrayView) -> str:
    """The file name of the one chunk of a 0-dimensional array (key ``c`` plus the suffix)."""
    return "c" + array.suffix
