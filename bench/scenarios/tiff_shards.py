"""Dual-access arrays, shards that are TIFF files (issue 6), in this process (no mount): an
8192 x 4096 uint16 image (``--quick``: 1024 x 1024) in zstd tiles of 256 x 256 and shards of
1024 x 1024. Every shard file read with ``tifffile.imread`` beside zarr reading the same
region (no floor); ``convert_to_tiff_array`` beside ``zarr.from_array`` into the same shards
and codecs (floor: >= 0.5x its pace)."""

from __future__ import annotations

import shutil

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

import zarrfuse
from bench.data import image_data
from bench.harness import MB, Context, Row, at_least, seconds
from zarrfuse.tiff.arrays import convert_to_tiff_array, shard_format_of, shard_grid

ISSUE = "6"
TILE, SHARD = (256, 256), (1024, 1024)


def measure(ctx: Context) -> list[Row]:
    shape = ctx.pick((8192, 4096), (1024, 1024))
    data = image_data(max(shape))[: shape[0], : shape[1]]
    source = zarr.create_array(ctx.work / "src", shape=shape, chunks=TILE, dtype="u2",
                               compressors=[ZstdCodec()])
    source[...] = data
    dual, plain = ctx.work / "dual", ctx.work / "plain"

    def convert() -> float:
        shutil.rmtree(dual, ignore_errors=True)
        return seconds(lambda: convert_to_tiff_array(ctx.work / "src", dual, tile_shape=TILE,
                                                     shard_shape=SHARD, compression="zstd",
                                                     progress=False))

    def copy() -> float:
        shutil.rmtree(plain, ignore_errors=True)
        return seconds(lambda: zarr.from_array(plain, data=source, chunks=TILE, shards=SHARD,
                                               compressors=[ZstdCodec()]))

    def read_tiffs() -> float:
        layout = shard_format_of(dual)
        array = zarrfuse.open_array(dual)
        files = [(c, dual / array.metadata.encode_chunk_key(c)) for c in shard_grid(layout)]
        took = seconds(lambda: [tifffile.imread(p) for _, p in files])
        for c, p in files[:: max(1, len(files) // 4)]:  # untimed check
            np.testing.assert_array_equal(tifffile.imread(p), data[layout.region(c)])
        return took

    got = ctx.interleave({"convert": convert, "zarr.from_array": copy})
    got |= ctx.interleave({"tifffile": read_tiffs,
                           "zarr": lambda: seconds(lambda: zarrfuse.open_array(dual)[...])})
    mb = data.nbytes / MB
    pace = {k: [mb / s for s in v] for k, v in got.items()}
    return [Row("read every shard as TIFF with tifffile", "MB/s", pace["tifffile"],
                ("zarr, same region", pace["zarr"])),
            Row("convert to dual-access", "MB/s", pace["convert"],
                ("zarr.from_array, same shards", pace["zarr.from_array"]), floor=at_least(0.5))]
