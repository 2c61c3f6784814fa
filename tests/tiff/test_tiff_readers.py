"""Which image programs read a dual-access shard, for each tile compression: every reader
docs/dual-access.md's table names runs here, on a real shard file, and its pixels are compared with
the array's. Where a reader cannot read a compression the test asserts how it fails, so a
reader that learns it (or forgets it) shows up as a failure and the table gets updated.

One small RGB uint8 array per compression (what thumbnailers show without conversion): three
tiles down, three across, the last column cut by the image edge, the first tile all zero (left
out by zarr, shown to TIFF readers as the shared fill tile).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from tests.mounting import mounted, run_with_timeout
from tests.tiff.shards import pillow_pixels, sample, tiffinfo_problems
from zarrfuse.tiff.arrays import create_tiff_array

pytestmark = pytest.mark.timeout(300)

SHAPE = (96, 80, 3)  # one shard of 3x3 tiles of 32x32; the image is 96 wide, so gdk-pixbuf-
SIZE = 96  # thumbnailer -s 96 keeps it at its own size (no scaling, exact pixels)
COMPRESSIONS = ("none", "deflate", "zstd")


class ReaderFailed(Exception):
    """The reader refused the file; the message is what it said."""


def _run(command: list[str | Path]) -> subprocess.CompletedProcess[str]:
    result = run_with_timeout(command, timeout=120, check=False)  # a shared, busy machine
    if result.returncode != 0:
        raise ReaderFailed(f"exit {result.returncode}: {result.stderr.strip()}")
    return result


def _png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)[..., :3]  # gdk-pixbuf adds an alpha channel


def read_tifffile(shard: Path, _work: Path) -> np.ndarray:
    return tifffile.imread(shard)


def read_pillow(shard: Path, _work: Path) -> np.ndarray:
    return pillow_pixels(shard)


def read_libtiff(shard: Path, work: Path) -> np.ndarray:
    """``tiffinfo -D`` reads every tile without a complaint; ``tiffcp`` (libtiff too) decodes
    them into an uncompressed copy, whose pixels are libtiff's reading."""
    problems = tiffinfo_problems(shard)
    if problems:
        raise ReaderFailed(problems)
    _run(["tiffcp", "-c", "none", shard, work / "libtiff.tif"])
    return tifffile.imread(work / "libtiff.tif")


def read_gdal(shard: Path, work: Path) -> np.ndarray:
    result = _run(["gdalinfo", "-checksum", shard])
    if "ERROR" in result.stdout + result.stderr or "Checksum=" not in result.stdout:
        raise ReaderFailed(result.stdout + result.stderr)
    _run(["gdal_translate", "-q", "-of", "PNG", shard, work / "gdal.png"])
    return _png(work / "gdal.png")


def read_vips(shard: Path, work: Path) -> np.ndarray:
    _run(["vipsheader", shard])
    _run(["vips", "copy", shard, work / "vips.png"])
    return _png(work / "vips.png")


_OPENCV = """
import sys, cv2, numpy
image = cv2.imread(sys.argv[1], cv2.IMREAD_UNCHANGED)
if image is None:
    sys.exit(3)
numpy.save(sys.argv[2], cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
"""


def read_opencv(shard: Path, work: Path) -> np.ndarray:
    """``cv2.imread`` in a child process: OpenCV reports why it failed only on stderr."""
    _run([sys.executable, "-c", _OPENCV, shard, work / "opencv.npy"])
    return np.load(work / "opencv.npy")


def read_ffmpegthumbnailer(shard: Path, work: Path) -> np.ndarray:
    _run(["ffmpegthumbnailer", "-s", "0", "-i", shard, "-o", work / "ffmpeg.png"])
    return _png(work / "ffmpeg.png")


def read_gdk_pixbuf(shard: Path, work: Path) -> np.ndarray:
    _run(["gdk-pixbuf-thumbnailer", "-s", str(SIZE), shard, work / "gdk.png"])
    return _png(work / "gdk.png")


READERS: dict[str, Callable[[Path, Path], np.ndarray]] = {
    "tifffile": read_tifffile,
    "Pillow": read_pillow,
    "libtiff": read_libtiff,
    "GDAL": read_gdal,
    "vips": read_vips,
    "OpenCV": read_opencv,
    "ffmpegthumbnailer": read_ffmpegthumbnailer,
    "gdk-pixbuf": read_gdk_pixbuf,
}

# What each reader does that is not "reads every pixel right" (docs/dual-access.md's table too).
BLACK = "black"  # opens the file, shows an all-black image, exits 0
REFUSES = {
    # OpenCV's wheels build their own libtiff without zstd.
    ("OpenCV", "zstd"): "ZSTD compression support is not configured",
    # libavcodec's TIFF decoder knows no Compression 50000 ...
    ("ffmpegthumbnailer", "zstd"): "Unknown compression method 50000",
    # ... and decodes tiles only in DNG files: of any other tiled TIFF it makes a black frame.
    ("ffmpegthumbnailer", "none"): BLACK,
    ("ffmpegthumbnailer", "deflate"): BLACK,
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, tuple[Path, str, np.ndarray]]:
    """Per compression: the array's store directory, the key of its one shard (a complete
    TIFF file on disk), and the image it holds."""
    root = tmp_path_factory.mktemp("readers")
    data = sample(SHAPE, "uint8", samples=True, seed=7)
    data[:32, :32] = 0  # the whole first tile: absent from the shard, the fill tile for TIFF
    made = {}
    for compression in COMPRESSIONS:
        array = create_tiff_array(root / compression, shape=SHAPE, dtype="uint8",
                                  tile_shape=(32, 32), samples=True, compression=compression)
        array[...] = data
        made[compression] = (root / compression, array.metadata.encode_chunk_key((0, 0, 0)),
                             data)
    return made


def check_reader(reader: str, compression: str, shard: Path, data: np.ndarray,
                 work: Path) -> None:
    """The reader does with ``shard`` what :data:`REFUSES` says, or reads ``data`` exactly."""
    expected = REFUSES.get((reader, compression))
    if expected is None:
        np.testing.assert_array_equal(READERS[reader](shard, work), data, err_msg=reader)
    elif expected == BLACK:
        shown = READERS[reader](shard, work)
        assert shown.shape == data.shape and not shown.any() and data.any(), reader
    else:
        with pytest.raises(ReaderFailed, match=expected):
            READERS[reader](shard, work)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_on_a_shard_file_in_the_store(shards, tmp_path, reader, compression):
    store, key, data = shards[compression]
    check_reader(reader, compression, store / key, data, tmp_path)


@pytest.mark.fuse
def test_readers_on_the_default_shard_through_the_raw_mount(shards, tmp_path):
    """The default (deflate) shard as the raw mount shows it: header, tiles and the index
    behind them, which TIFF readers ignore. Every reader, as in the store directory."""
    store, key, data = shards["deflate"]
    with mounted(store, tmp_path / "mnt") as mnt:
        shown = mnt / key
        assert shown.stat().st_size > (store / key).stat().st_size  # the index follows
        for reader in sorted(READERS):
            check_reader(reader, "deflate", shown, data, tmp_path)
