"""The mount's names: each inode's node (``inodes``' table), and the catalog the directory
kinds look names up in (``nodes``: each kind answers its own lookups and listings)."""

from __future__ import annotations

from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.inodes import InodeTable
from zarrfuse.filesystem.tree.nodes import Entry, Node

__all__ = ["Namespace"]


class Namespace(InodeTable):
    """The inode table, and the catalog names are looked up in."""

    def __init__(self, root: Node, catalog: Catalog) -> None:
        super().__init__(root)
        self.catalog = catalog

    async def lookup(self, parent: Node, name: str) -> Entry:
        """The entry ``name`` in directory ``parent``; NotFound if there is none."""
        return await parent.lookup(name, self.catalog)

    async def list(self, directory: Node) -> list[Entry]:
        """Every entry of a directory, in a stable order."""
        return await directory.children(self.catalog)
