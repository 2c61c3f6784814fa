"""Chunks in grid order (C order), as views list them and tools read them: what comes next."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["after"]


def after(coords: tuple[int, ...], grid: tuple[int, ...], count: int) -> Iterator[tuple[int, ...]]:
    """Up to ``count`` coordinates after ``coords`` in C order within ``grid``."""
    following = list(coords)
    for _ in range(count if following else 0):
        for dim in range(len(following) - 1, -1, -1):
            following[dim] += 1
            if following[dim] < grid[dim]:
                break
            following[dim] = 0
        else:
            return  # past the grid's end
        yield tuple(following)
