"""The built-in demo: scikit-image's bundled astronaut photograph (no download) written as a
small OME-Zarr v0.5 pyramid (axes c, y, x; each level half the one before), mounted as TIFF
files (one colour picture per chunk) and as one OME-TIFF, every pixel checked, then unmounted
and removed, also when it fails or is interrupted. ``--hold`` keeps the mounts until Enter,
Ctrl-C or (no terminal) SIGTERM; a ``DIR`` given keeps the demo there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
import zarr

__all__ = ["astronaut_pyramid", "run"]

LEVELS = 3
CHUNK = 128
IMAGE_NAME = "astronaut.ome.zarr"
OPENERS = {".imagej.tif": "the full resolution for ImageJ 1.x, as a hyperstack",
           ".ome.tif": "the colour pyramid: Fiji (Bio-Formats), QuPath, napari, eog, GIMP",
           ".composite.tif": "the channels in their colours, 8-bit RGB: any image viewer",
           ".preview.png": "a small picture, for file managers' thumbnails"}
"""What opens each whole-image file the demo shows, by the end of its name."""
INSTALL_HINT = 'the demo\'s picture comes from scikit-image: pip install "zarrfuse[demo]"'


def _picture() -> np.ndarray:
    """The astronaut photograph as (c, y, x) uint8: scikit-image ships it in its wheel."""
    from skimage import data  # noqa: PLC0415  (an optional dependency, the demo extra)

    return np.ascontiguousarray(np.moveaxis(data.astronaut(), -1, 0))


def _halve(image: np.ndarray) -> np.ndarray:
    """The next pyramid level: 2 x 2 means over y and x."""
    c, y, x = image.shape
    blocks = image[:, : y // 2 * 2, : x // 2 * 2].reshape(c, y // 2, 2, x // 2, 2)
    return blocks.mean(axis=(2, 4)).round().astype(image.dtype)


def astronaut_pyramid(path: Path) -> list[np.ndarray]:
    """Write the OME-Zarr image at ``path``; its levels' pixels, full resolution first.
    Arrays carry the axes as dimension names, as OME-Zarr 0.5 requires."""
    levels = [_picture()]
    for _ in range(LEVELS - 1):
        levels.append(_halve(levels[-1]))
    group = zarr.open_group(path, mode="w", zarr_format=3)
    datasets: list[dict[str, Any]] = []
    for index, pixels in enumerate(levels):
        group.create_array(str(index), data=pixels, chunks=(3, CHUNK, CHUNK),
                           dimension_names=("c", "y", "x"))
        scale = float(2**index)
        datasets.append({"path": str(index), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, scale, scale]}]})
    group.attrs["ome"] = {
        "version": "0.5",
        "multiscales": [{
            "name": "astronaut",
            "type": "mean",  # each level the 2 x 2 means of the one above (_halve)
            "axes": [{"name": "c", "type": "channel"},
                     {"name": "y", "type": "space", "unit": "micrometer"},
                     {"name": "x", "type": "space", "unit": "micrometer"}],
            "datasets": datasets,
        }],
        # The channels are the photograph's red, green and blue: shown as one colour picture.
        "omero": {"channels": [{"label": name, "color": colour} for name, colour in (
            ("red", "FF0000"), ("green", "00FF00"), ("blue", "0000FF"))]},
    }
    return levels


def _zarrfuse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zarrfuse", *args], capture_output=True, text=True, timeout=120
    )


@contextlib.contextmanager
def _mounted(source: Path, mountpoint: Path, *options: str) -> Iterator[Path]:
    """``source`` mounted read-only at ``mountpoint`` with ``options``; unmounted after."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    done = _zarrfuse("mount", str(source), str(mountpoint), "--read-only", *options)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"zarrfuse mount exited {done.returncode}")
    try:
        yield mountpoint
    finally:
        _zarrfuse("umount", str(mountpoint))


def _check_tiles(mountpoint: Path, level: np.ndarray) -> list[Path]:
    """Every file of the full-resolution level (one colour picture per chunk, at
    ``planes/yROW/yROW-xCOLUMN.tiff``) holds its tile's pixels exactly, red, green, blue."""
    files = sorted((mountpoint / "0").rglob("*.tiff"))
    rows, cols = -(-level.shape[1] // CHUNK), -(-level.shape[2] // CHUNK)
    if len(files) != rows * cols:
        raise AssertionError(f"{len(files)} TIFF files, expected {rows * cols}")
    for file in files:
        row, col = (int(part[1:]) for part in file.with_suffix("").name.split("-"))
        tile = level[:, row * CHUNK : (row + 1) * CHUNK, col * CHUNK : (col + 1) * CHUNK]
        if not np.array_equal(tifffile.imread(file), np.moveaxis(tile, 0, -1)):
            raise AssertionError(f"{file} differs from the source")
    return files


def _check_whole(file: Path, levels: list[np.ndarray]) -> None:
    """The OME-TIFF holds every level of the pyramid, exactly, as one colour picture (the
    channels are its samples: y, x, RGB)."""
    with tifffile.TiffFile(file) as tif:
        series = tif.series[0]
        if series.axes != "YXS":
            raise AssertionError(f"{file}: axes {series.axes}, expected one colour picture")
        if len(series.levels) != len(levels):
            raise AssertionError(f"{file}: {len(series.levels)} levels, expected {len(levels)}")
        for shown, pixels in zip(series.levels, levels, strict=True):
            if not np.array_equal(shown.asarray(), np.moveaxis(pixels, 0, -1)):
                raise AssertionError(f"{file}: a level differs from the source")


def run(directory: str | None = None, *, hold: bool = False) -> int:
    """Build, mount, show, check, unmount, clean up. Returns a process exit code."""
    try:
        import skimage  # noqa: F401, PLC0415  (checked before anything is written)
    except ImportError:
        print(f"zarrfuse: {INSTALL_HINT}", file=sys.stderr)
        return 1
    root = Path(directory).absolute() if directory else Path(tempfile.mkdtemp(
        prefix="zarrfuse-demo-"))
    try:
        return _show(root, hold=hold)
    except (RuntimeError, AssertionError) as e:
        print(f"zarrfuse: demo failed: {e}", file=sys.stderr)
        return 1
    finally:
        if directory is None:
            shutil.rmtree(root, ignore_errors=True)
            print(f"removed {root}")


def _show(root: Path, *, hold: bool) -> int:
    source = root / IMAGE_NAME
    levels = astronaut_pyramid(source)
    shape = " > ".join("x".join(map(str, level.shape)) for level in levels)
    print(f"wrote the OME-Zarr image {source} (c, y, x: {shape}), chunks of 3x{CHUNK}x{CHUNK}")
    with _mounted(source, root / "tiff", "--format", "tiff") as tiffs, \
            _mounted(source, root / "ome-tiff", "--format", "ome-tiff") as whole:
        tiles = _check_tiles(tiffs, levels[0])
        image = whole / "astronaut.ome.tif"
        _check_whole(image, levels)
        print(f"mounted as TIFF files, one colour picture per chunk: {tiffs}  ({len(tiles)} "
              "at full size)")
        print(f"    open, for example: {tiles[0]}  (any image viewer)")
        print(f"mounted as one image, each file for its programs: {whole}")
        for file in sorted(whole.iterdir()):
            opener = next(o for end, o in OPENERS.items() if file.name.endswith(end))
            print(f"    open: {file}  ({opener})")
        print("checked: every file holds exactly the source pixels")
        if hold:
            with contextlib.suppress(KeyboardInterrupt):
                _hold()
    print("unmounted")
    return 0


def _hold() -> None:
    """Until Enter or Ctrl-C; with stdin at its end (no terminal), until SIGINT or SIGTERM."""
    try:
        input("the mounts stay until you press Enter (or Ctrl-C); open the files above ... ")
    except EOFError:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        print(f"\nno terminal (stdin is at its end): the mounts stay until SIGINT or SIGTERM "
              f"(kill {os.getpid()})", flush=True)
        while True:
            signal.pause()
