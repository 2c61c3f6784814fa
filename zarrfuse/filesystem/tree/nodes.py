"""The nodes of the mount's tree: each a value (a group, an array root, a fanout directory, a
chunk file, a metadata file...), so the same path always maps to the same node."""

from __future__ import annotations

from dataclasses import dataclass

from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.fanout_tree import DirPosition
from zarrfuse.filesystem.tree.mounted import ArrayView, GroupView

__all__ = [
    "DIRECTORY_NODES",
    "METADATA_NAME",
    "ArrayRoot",
    "ChunkFile",
    "Entry",
    "FanoutDir",
    "GroupDir",
    "ImageDir",
    "ImageFile",
    "KeyDir",
    "MetadataFile",
    "Node",
    "ScratchFile",
    "array_of",
]

METADATA_NAME = "zarr.json"


@dataclass(frozen=True)
class GroupDir:
    group: GroupView


@dataclass(frozen=True)
class ArrayRoot:
    array: ArrayView


@dataclass(frozen=True)
class FanoutDir:
    array: ArrayView
    pos: DirPosition


@dataclass(frozen=True)
class ChunkFile:
    array: ArrayView
    coords: tuple[int, ...]


@dataclass(frozen=True)
class ScratchFile:
    """A temporary file (an editor's or rsync's) held by the daemon, never stored."""

    directory: GroupDir | ArrayRoot | FanoutDir | KeyDir | ImageDir
    name: str


@dataclass(frozen=True)
class KeyDir:
    """A directory of an array's own keys (source layout): the names below the array."""

    array: ArrayView
    names: tuple[str, ...]


@dataclass(frozen=True)
class ImageDir:
    """The root of a whole-image mount of one array (or one OME-Zarr image): it holds that
    image's one file."""

    image: WholeImage


@dataclass(frozen=True)
class ImageFile:
    """A whole array (or OME-Zarr pyramid) as one OME-TIFF file (``--format ome-tiff``):
    one inode per version of the image (``image_versions``)."""

    image: WholeImage
    version: int = 0


@dataclass(frozen=True)
class MetadataFile:
    """A metadata document the node shows (``zarr.json``, ``.zarray``, ...)."""

    owner: ArrayView | GroupView
    name: str = METADATA_NAME

    @property
    def data(self) -> bytes:
        return self.owner.documents[self.name]


Node = (
    GroupDir | ArrayRoot | FanoutDir | KeyDir | ChunkFile | MetadataFile | ScratchFile
    | ImageDir | ImageFile
)
DIRECTORY_NODES = (GroupDir, ArrayRoot, FanoutDir, KeyDir, ImageDir)


@dataclass(frozen=True)
class Entry:
    """A named node and, for files, its size and time (None: the node's fixed time)."""

    name: str
    node: Node
    size: int = 0
    mtime_ns: int | None = None


def array_of(node: Node) -> ArrayView | None:
    """The array a file or directory belongs to (scratch files: their directory's)."""
    if isinstance(node, ScratchFile):
        node = node.directory
    if isinstance(node, MetadataFile | GroupDir | ImageDir | ImageFile):
        return None
    return node.array
