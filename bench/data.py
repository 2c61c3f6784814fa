"""The data sets scenarios share, written through zarr-python, and the names the mount gives
their chunk files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, ZstdCodec

SLIDE, TILE = 100_000, 256


def image_data(side: int) -> np.ndarray:
    """``side`` x ``side`` uint16, a gradient with noise, as a camera's."""
    y, x = np.mgrid[0:side, 0:side]
    noise = np.random.default_rng(0).integers(0, 64, (side, side))
    return ((x * 7 + y * 13) % 4096 + noise).astype("u2")


def make_image(root: Path | str, side: int = 4096, shards: int | None = None,
               **options) -> np.ndarray:
    """The image in zstd chunks of 256 x 256 (in shards of ``shards`` squared, if given);
    ``options`` reach ``create_array`` (``storage_options`` of a remote store)."""
    data = image_data(side)
    create = zarr.create_array if isinstance(root, Path) else _remote_create
    arr = create(root, shape=data.shape, chunks=(TILE, TILE), dtype="u2",
                 shards=(shards, shards) if shards else None,
                 compressors=[ZstdCodec(level=3)], **options)
    arr[...] = data
    return data


def _remote_create(url: str, **kw):  # type: ignore[no-untyped-def]
    import zarrfuse  # noqa: PLC0415  (only for remote stores: zarr-python opens local ones)

    return zarrfuse.create_array(url, **kw)


def make_slide(root: Path, side: int = SLIDE) -> None:
    """``side`` squared uint16, 256 x 256 zstd chunks, its first 4 x 4 chunks stored."""
    arr = zarr.create_array(root, shape=(side, side), chunks=(TILE, TILE), dtype="u2",
                            compressors=[ZstdCodec(level=3)], fill_value=0)
    arr[: 4 * TILE, : 4 * TILE] = np.random.default_rng(1).integers(
        0, 4000, (4 * TILE, 4 * TILE)).astype("u2")


def make_files(root: Path, n: int, size: int, seed: int = 4) -> None:
    """``n`` chunk files of ``size`` random bytes (uncompressed uint8) in one store
    directory, ``c/0`` ... ``c/N-1``."""
    arr = zarr.create_array(root, shape=(n * size,), chunks=(size,), dtype="u1",
                            compressors=None, serializer=BytesCodec(), fill_value=0)
    rng = np.random.default_rng(seed)
    step = max(1, (64 << 20) // size)  # chunks per write: bounded memory
    for i in range(0, n, step):
        j = min(n, i + step)
        arr[i * size : j * size] = np.frombuffer(rng.bytes((j - i) * size), dtype="u1")
    for i in (0, n - 1):
        got = (root / store_key((i,))).stat().st_size
        if got != size:
            raise RuntimeError(f"{store_key((i,))}: {got} bytes stored, {size} expected")


def fanout(coord: int, width: int = 3) -> str:
    """The mount's default (fanout, 1000 children) path of one coordinate."""
    digits = str(coord)
    groups = -(-len(digits) // width)
    digits = digits.zfill(groups * width)
    return "/".join([str(groups - 1)] + [digits[i : i + width]
                                         for i in range(0, len(digits), width)])


def view_key(coords: tuple[int, ...]) -> str:
    return "c/" + "/".join(fanout(c) for c in coords)


def store_key(coords: tuple[int, ...]) -> str:
    return "c/" + "/".join(str(c) for c in coords)
