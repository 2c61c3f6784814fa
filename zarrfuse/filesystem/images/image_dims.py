"""Which grid dimensions a rendered view's paths name (those of one chunk make no level: a
5-D image of one t, c and z would put every tile alone in a directory), and coordinates
between the two grids, order kept. Pure code.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ShownDims"]


@dataclass(frozen=True)
class ShownDims:
    """The dimensions of ``grid`` (the full chunk grid) that paths name, in grid order."""

    grid: tuple[int, ...]
    dims: tuple[int, ...]

    @classmethod
    def for_browsing(cls, grid: tuple[int, ...]) -> ShownDims | None:
        """Leave out the dimensions of extent 1 (an extent-0 one stays); None if none."""
        if 1 not in grid:
            return None
        return cls(grid, tuple(d for d, n in enumerate(grid) if n != 1))

    @property
    def shown_grid(self) -> tuple[int, ...]:
        """The grid of the dimensions paths name (the fanout tree's grid)."""
        return tuple(self.grid[d] for d in self.dims)

    def full(self, shown: tuple[int, ...]) -> tuple[int, ...]:
        """Full grid coordinates of the chunk a path names (0 where left out)."""
        coords = [0] * len(self.grid)
        for value, dim in zip(shown, self.dims, strict=True):
            coords[dim] = value
        return tuple(coords)

    def shown(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The coordinates a chunk's path names."""
        return tuple(coords[d] for d in self.dims)
