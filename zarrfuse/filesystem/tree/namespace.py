"""The mount's names: the inode of each node while the kernel remembers it (dropped at
``forget``; the root is 1), and the catalog the directory kinds look names up in.
"""

from __future__ import annotations

from typing import TypeVar

from zarrfuse.errors import NotFound
from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.nodes import Entry, Node

__all__ = ["ROOT_INODE", "Namespace"]

ROOT_INODE = 1  # FUSE_ROOT_ID

N = TypeVar("N", bound=Node)


class Namespace:
    """Nodes <-> inodes, the kernel's lookup count of each inode, and the catalog."""

    def __init__(self, root: Node, catalog: Catalog) -> None:
        self.catalog = catalog
        self._by_node: dict[Node, int] = {root: ROOT_INODE}
        self._by_inode: dict[int, Node] = {ROOT_INODE: root}
        self._lookups: dict[int, int] = {}
        self._next_inode = ROOT_INODE + 1

    def inode_of(self, node: Node) -> int:
        inode = self._by_node.get(node)
        if inode is None:
            inode = self._next_inode
            self._next_inode += 1
            self._by_node[node] = inode
            self._by_inode[inode] = node
        return inode

    def node(self, inode: int) -> Node:
        try:
            return self._by_inode[inode]
        except KeyError:
            raise NotFound(f"unknown inode {inode}") from None

    def remember(self, inode: int) -> None:
        """The kernel now holds one more reference (lookup, create, accepted readdir entry)."""
        self._lookups[inode] = self._lookups.get(inode, 0) + 1

    def forget(self, inode: int, count: int) -> None:
        left = self._lookups.get(inode, 0) - count
        if left > 0:
            self._lookups[inode] = left
            return
        self._lookups.pop(inode, None)
        if inode != ROOT_INODE:
            node = self._by_inode.pop(inode, None)
            if node is not None and self._by_node.get(node) == inode:
                del self._by_node[node]

    def retire(self, node: Node) -> None:
        """Give ``node`` a fresh inode at its next lookup; the kernel's handles of the old
        one keep it (and its page cache) until it forgets it (see ``page_cache``)."""
        inode = self._by_node.get(node)
        if inode is not None and inode != ROOT_INODE:
            del self._by_node[node]
            if not self._lookups.get(inode):  # the kernel holds no reference to it
                del self._by_inode[inode]

    def known(self, inode: int) -> Node | None:
        """The node of ``inode`` while the kernel may hold it."""
        return self._by_inode.get(inode)

    def known_nodes(self, kind: type[N]) -> list[N]:
        """The nodes of ``kind`` the kernel may hold."""
        return [node for node in self._by_inode.values() if isinstance(node, kind)]

    def known_inode(self, node: Node) -> int | None:
        """The inode the kernel may hold for ``node``, without handing out a new one."""
        return self._by_node.get(node)

    def rebind(self, inode: int, node: Node) -> None:
        """After a rename the kernel keeps the moved file's inode: make it mean ``node``."""
        old = self._by_inode.get(inode)
        if old is not None and self._by_node.get(old) == inode:
            del self._by_node[old]
        self._by_inode[inode] = node
        self._by_node[node] = inode

    @property
    def inode_count(self) -> int:
        return len(self._by_inode)

    async def lookup(self, parent: Node, name: str) -> Entry:
        """The entry ``name`` in directory ``parent``; NotFound if there is none."""
        return await parent.lookup(name, self.catalog)

    async def list(self, directory: Node) -> list[Entry]:
        """Every entry of a directory, in a stable order (last: the name ``list`` would
        shadow the type in the annotations below it)."""
        return await directory.children(self.catalog)
