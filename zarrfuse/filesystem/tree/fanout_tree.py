"""The view of an array: its shown chunk key encoding and directory tree. Every directory the
grid can have can be looked up (a chunk can be created anywhere); listings show only those
leading to stored chunks. Pure code, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    canonical_coordinate,
)
from zarrfuse.zarr_compat import ChunkKeyEncoding

__all__ = ["DirPosition", "FanoutTree", "view_encoding"]

DEFAULT_MAX_CHILDREN = 1000


def view_encoding(
    array_encoding: ChunkKeyEncoding, suffix: str | None, max_children: int | None
) -> ChunkKeyEncoding:
    """The encoding the mount shows: the array's own where fanout- or suffix-based, else
    fanout with ``max_children`` 1000; ``suffix`` and ``max_children`` override."""
    own_suffix = ""
    base = array_encoding
    if isinstance(base, SuffixChunkKeyEncoding):
        own_suffix, base = base.suffix, base.base_encoding
    own_children = base.max_children if isinstance(base, FanoutChunkKeyEncoding) else None
    fanout = FanoutChunkKeyEncoding(
        max_children if max_children is not None else own_children or DEFAULT_MAX_CHILDREN
    )
    final_suffix = own_suffix if suffix is None else suffix
    return SuffixChunkKeyEncoding(final_suffix, fanout) if final_suffix else fanout


@dataclass(frozen=True)
class DirPosition:
    """A directory below ``c``: completed coordinates and, once ``count`` is named, the
    ``prefix`` of the ``taken`` groups chosen for the current coordinate."""

    done: tuple[int, ...] = ()
    count: int | None = None
    prefix: int = 0
    taken: int = 0


@dataclass(frozen=True)
class FanoutTree:
    """The directory tree of fanout keys for one chunk grid."""

    grid: tuple[int, ...]
    encoding: FanoutChunkKeyEncoding
    axes: tuple[str, ...] | None = None
    """Names that label each dimension's levels, so a person can tell them apart (a plane
    view: ``planes/t005/c001/z012/y000/t005-c001-z012-y000-x003.tiff``): the value levels
    are the name and digits; a group count level (``t``; ``t1`` for two groups...) only
    where a dimension has more values than one directory holds; a file's name holds every
    coordinate. None: plain digits under ``c``, as the fanout encoding names them."""

    def _axis(self, dim: int) -> str:
        return "" if self.axes is None else self.axes[dim]

    @property
    def top(self) -> str:
        """The name of the tree's top directory."""
        return "c" if self.axes is None else "planes"

    @property
    def root(self) -> DirPosition:
        """The top directory's position."""
        return self._enter(())

    def _implied_count(self, dim: int) -> bool:
        """Whether the group count level of ``dim`` is left out (labelled trees, where the
        dimension fits in one directory: the count can only be 0)."""
        return self.axes is not None and self._groups(max(0, self.grid[dim] - 1)) == 1

    def _enter(self, done: tuple[int, ...]) -> DirPosition:
        if len(done) < len(self.grid) and self._implied_count(len(done)):
            return DirPosition(done, 0, 0, 0)
        return DirPosition(done)

    def _count_name(self, dim: int, count: int) -> str:
        if self.axes is None:
            return str(count)
        return self.axes[dim] + (str(count) if count else "")

    def _count_of(self, dim: int, name: str) -> int | None:
        if self.axes is None:
            return canonical_coordinate(name)
        axis = self.axes[dim]
        if not name.startswith(axis):
            return None
        rest = name[len(axis) :]
        count = canonical_coordinate(rest) if rest else 0
        return None if count == 0 and rest else count

    @cached_property
    def width(self) -> int:
        """Digits per level (kept: every file name of a listing asks for it)."""
        return self.encoding.group_width

    @property
    def has_chunks(self) -> bool:
        return all(n > 0 for n in self.grid)

    def _groups(self, value: int) -> int:
        return max(1, -(-len(str(value)) // self.width))

    def _span(self, pos: DirPosition) -> tuple[int, int]:
        """Range of group values that are children of ``pos`` (which is at group level)."""
        assert pos.count is not None
        lo, hi = self.value_range(pos)
        scale = 10 ** (self.width * (pos.count - pos.taken))
        base = pos.prefix * 10**self.width
        return lo // scale - base, hi // scale - base

    def is_leaf(self, pos: DirPosition) -> bool:
        """True where the children are chunk files (last group of the last dimension)."""
        return (
            pos.count is not None
            and len(pos.done) == len(self.grid) - 1
            and pos.taken == pos.count
        )

    def leaf_range(self, pos: DirPosition) -> tuple[int, int]:
        """Inclusive range of the last coordinate of the chunks in leaf directory ``pos``."""
        vmin, vmax = self._span(pos)
        base = pos.prefix * 10**self.width
        return base + vmin, base + vmax

    def labelled(self, key_names: Sequence[str]) -> list[str]:
        """The names of a fanout chunk key (after ``c``) as this tree shows them."""
        if self.axes is None:
            return list(key_names)
        out, i, values = [], 0, []
        for dim, axis in enumerate(self.axes):
            count = int(key_names[i])
            if not self._implied_count(dim):
                out.append(self._count_name(dim, count))
            groups = key_names[i + 1 : i + 2 + count]
            out += [axis + group for group in groups]
            values.append(int("".join(groups)))
            i += 2 + count
        out[-1] = self.file_name(tuple(values[:-1]), values[-1])
        return out

    def is_file_stem(self, stem: str) -> bool:
        """Whether ``stem`` looks like a chunk file's name (in or out of the grid)."""
        digits = stem.rpartition("-")[2].removeprefix(self._axis(len(self.grid) - 1))
        return bool(digits) and digits.isascii() and digits.isdigit()

    def file_name(self, done: tuple[int, ...], coordinate: int) -> str:
        """Name of the chunk file ``(*done, coordinate)`` in its leaf directory, without the
        view suffix: the last group of digits, or in a labelled tree every coordinate."""
        if self.axes is None:
            return str(coordinate % 10**self.width).zfill(self.width)
        return "-".join(axis + str(value).zfill(self.width)
                        for axis, value in zip(self.axes, (*done, coordinate), strict=True))

    def _leaf_child(self, pos: DirPosition, name: str) -> int | None:
        """The last coordinate a labelled tree's file ``name`` in leaf ``pos`` stands for."""
        digits = name.rpartition("-")[2].removeprefix(self._axis(len(self.grid) - 1))
        if not digits.isascii() or not digits.isdigit():
            return None
        value = int(digits)
        lo, hi = self.leaf_range(pos)
        if not lo <= value <= hi or name != self.file_name(pos.done, value):
            return None
        return value

    def child_names(self, pos: DirPosition) -> list[str]:
        """Names of the children of ``pos``, in order (for leaves: every possible chunk)."""
        if self.axes is not None and self.is_leaf(pos):
            lo, hi = self.leaf_range(pos)
            return [self.file_name(pos.done, v) for v in range(lo, hi + 1)]
        if pos.count is None:
            dim = len(pos.done)
            top = self._groups(self.grid[dim] - 1)
            return [self._count_name(dim, n) for n in range(top)]
        vmin, vmax = self._span(pos)
        axis = self._axis(len(pos.done))
        return [axis + str(v).zfill(self.width) for v in range(vmin, vmax + 1)]

    def child(self, pos: DirPosition, name: str) -> DirPosition | int | None:
        """The child called ``name`` (a directory position, or a leaf's last coordinate), or
        None; checks are exact, so ``007`` and ``7`` differ."""
        if self.axes is not None and self.is_leaf(pos):
            return self._leaf_child(pos, name)
        if pos.count is None:
            count = self._count_of(len(pos.done), name)
            if count is None:
                return None
            if count >= self._groups(self.grid[len(pos.done)] - 1):
                return None
            return DirPosition(pos.done, count, 0, 0)
        axis = self._axis(len(pos.done))
        if not name.startswith(axis):
            return None
        name = name[len(axis) :]
        if len(name) != self.width or not name.isascii() or not name.isdigit():
            return None
        value = int(name)
        vmin, vmax = self._span(pos)
        if not vmin <= value <= vmax:
            return None
        combined = pos.prefix * 10**self.width + value
        if pos.taken < pos.count:
            return DirPosition(pos.done, pos.count, combined, pos.taken + 1)
        if len(pos.done) == len(self.grid) - 1:
            return combined
        return self._enter((*pos.done, combined))

    def value_range(self, pos: DirPosition) -> tuple[int, int]:
        """Inclusive range of the values of dimension ``len(pos.done)`` below ``pos``."""
        top = self.grid[len(pos.done)] - 1
        if pos.count is None:
            return 0, top
        w = self.width
        lo = 0 if pos.count == 0 else 10 ** (w * pos.count)
        hi = min(top, 10 ** (w * (pos.count + 1)) - 1)
        scale = 10 ** (w * (pos.count + 1 - pos.taken))
        return max(lo, pos.prefix * scale), min(hi, (pos.prefix + 1) * scale - 1)

    def _child_name_of(self, pos: DirPosition, value: int) -> str:
        """The child of ``pos`` whose subtree holds ``value`` (of dimension len(pos.done))."""
        if pos.count is None:
            return self._count_name(len(pos.done), self._groups(value) - 1)
        group = value // 10 ** (self.width * (pos.count - pos.taken)) % 10**self.width
        return self._axis(len(pos.done)) + str(group).zfill(self.width)

    def stored_child_names(self, pos: DirPosition, stored: Sequence[int]) -> list[str]:
        """The children of non-leaf ``pos`` that lead to a stored value, in order; ``stored``
        is the sorted values of dimension ``len(pos.done)`` that start a stored chunk."""
        lo, hi = self.value_range(pos)
        at, end = bisect_left(stored, lo), bisect_right(stored, hi)
        names = []
        while at < end:  # a child per step: the values below it are skipped, not named
            value = stored[at]
            names.append(self._child_name_of(pos, value))
            at = bisect_right(stored, self._child_end(pos, value), at, end)
        return names

    def _child_end(self, pos: DirPosition, value: int) -> int:
        """The last value (of dimension len(pos.done)) in the child of ``pos`` that holds
        ``value``."""
        if pos.count is None:
            return 10 ** (self.width * self._groups(value)) - 1
        scale = 10 ** (self.width * (pos.count - pos.taken))
        return (value // scale + 1) * scale - 1
