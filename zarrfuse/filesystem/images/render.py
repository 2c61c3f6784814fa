"""Decoded chunks as image files, and back: TIFF, NPY, PNG. Pure functions. Uncompressed, so
``stat`` knows a file's size from the chunk's shape and dtype without decoding it."""

from __future__ import annotations

import functools
import io
import math
from typing import IO, Any, cast

import numpy as np
import tifffile
from PIL import Image

from zarrfuse.errors import ConfigurationError, InvalidArgument
from zarrfuse.filesystem.images.formats import FORMATS

__all__ = ["FORMATS", "check_renderable", "colour_picture", "decode", "encode", "encoded_size"]

COLOUR_DTYPES = (np.dtype("uint8"), np.dtype("uint16"))
"""Sample types a colour picture may have (what viewers show as RGB)."""


def colour_picture(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether an image of ``shape`` is one colour picture: ``y, x`` and 3 or 4 samples
    (RGB, RGBA) of uint8 or uint16. A rendered view gives such chunks to the encoder whole
    (``planes``), and only those; TIFF then writes one RGB(A) page, PNG one colour image."""
    return len(shape) == 3 and shape[-1] in (3, 4) and np.dtype(dtype) in COLOUR_DTYPES


def _tiff_photometric(shape: tuple[int, ...], dtype: np.dtype) -> dict[str, Any]:
    """tifffile's arguments for the picture: RGB(A) for a colour picture (the 4th sample
    an unassociated alpha, as PNG's), else grey, whose trailing 3 or 4 stays a dimension."""
    if not colour_picture(shape, dtype):
        return {"photometric": "minisblack"}
    extra = {"extrasamples": ("unassalpha",)} if shape[-1] == 4 else {}
    return {"photometric": "rgb", "planarconfig": "contig", **extra}



def _png_mode(dtype: np.dtype, shape: tuple[int, ...]) -> bool:
    if len(shape) == 2:
        return dtype in COLOUR_DTYPES
    return colour_picture(shape, dtype) and dtype == np.dtype("uint8")


def check_renderable(fmt: str, dtype: np.dtype, chunk_shape: tuple[int, ...]) -> None:
    """Refuse arrays a format cannot show (PNG: 2-D uint8/uint16, 8-bit RGB/RGBA)."""
    if fmt not in FORMATS:
        raise ConfigurationError(f"unknown format {fmt!r}; choose one of {sorted(FORMATS)}")
    if dtype.hasobject and not (fmt == "npy" and dtype.kind == "T"):
        raise ConfigurationError(f"{fmt}: variable-size data type {dtype} cannot be rendered"
                                 + (" (npy shows strings)" if dtype.kind == "T" else ""))
    if fmt == "png" and not _png_mode(dtype, chunk_shape):
        raise ConfigurationError(
            f"png shows 2-D uint8/uint16 chunks and 8-bit RGB/RGBA chunks (last dimension 3 or "
            f"4, whole in each chunk); this array has {dtype} chunks of shape {chunk_shape}: "
            "use --format tiff or npy"
        )


def encode(fmt: str, data: np.ndarray) -> bytes:
    """The file showing ``data`` (one chunk, cropped to the array bounds). Single-page TIFF
    and NPY copy the values into a template (:func:`_template`); variable-length strings
    (NPY only) are as wide as the chunk's longest value."""
    if data.dtype.kind == "T":
        data = data.astype(f"<U{max(1, int(np.strings.str_len(data).max(initial=0)))}")
    template = _template(fmt, data.shape, data.dtype.str)
    if template is not None:
        prefix, suffix = template
        return b"".join((prefix, np.ascontiguousarray(data).tobytes(), suffix))
    return _encode(fmt, data)


def _encode(fmt: str, data: np.ndarray) -> bytes:
    out = io.BytesIO()
    if fmt == "tiff":
        # A colour picture is one RGB(A) page. Otherwise minisblack keeps a trailing 3 or 4
        # from being read as RGB; leading dimensions become pages, and tifffile's shape
        # description restores the exact shape (also for 0-d and 1-d chunks, written as one
        # row: tifffile fails on some of those as they are).
        shape = data.shape
        image = data.reshape(_tiff_image_shape(shape))
        tifffile.imwrite(out, image, **_tiff_photometric(shape, data.dtype),
                         metadata={"shape": list(shape)})
    elif fmt == "npy":
        np.save(out, data, allow_pickle=False)
    elif fmt == "png":
        Image.fromarray(data).save(out, format="PNG", compress_level=0)
    else:
        raise ConfigurationError(f"unknown format {fmt!r}")
    return out.getvalue()


def decode(fmt: str, data: bytes, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The chunk a written file holds; InvalidArgument (EINVAL) unless it has exactly
    ``shape`` and ``dtype`` (strings of any fixed width for variable-length ones)."""
    try:
        if fmt == "tiff":
            value = tifffile.imread(io.BytesIO(data))
        elif fmt == "npy":
            value = np.load(io.BytesIO(data), allow_pickle=False)
        else:
            with Image.open(io.BytesIO(data)) as image:
                value = np.asarray(image)
    except Exception as e:  # every decoder has its own error types
        raise InvalidArgument(f"not a readable {fmt} file: {type(e).__name__}: {e}") from e
    with_alpha = ((*shape, 2) if len(shape) == 2 else (*shape[:2], 4)
                  if shape[-1:] == (3,) and colour_picture(shape, dtype) else None)
    if value.shape == with_alpha and value.dtype == dtype:
        value = _opaque_alpha_dropped(fmt, value)
    strings = dtype.kind == "T" and value.dtype.kind == "U"  # of any width
    if value.shape != shape or (value.dtype != dtype and not strings):
        raise InvalidArgument(
            f"the {fmt} file holds {value.dtype} of shape {value.shape}; this chunk is {dtype} "
            f"of shape {shape}"
        )
    return value.astype(dtype) if strings else value


def _opaque_alpha_dropped(fmt: str, value: np.ndarray) -> np.ndarray:
    """``value`` without the alpha channel an editor added to a chunk that has none
    (ImageMagick's ``-draw``, GIMP's export): dropped where it is opaque everywhere, as it
    changes nothing; refused where any pixel is translucent, as storing would lose that."""
    alpha = value[..., -1]
    opaque = np.iinfo(value.dtype).max if value.dtype.kind in "ui" else 1
    if (alpha != opaque).any():
        raise InvalidArgument(
            f"the {fmt} file adds an alpha channel, translucent in "
            f"{np.count_nonzero(alpha != opaque)} of {alpha.size} pixels; this chunk has none: "
            "flatten the image (or remove its alpha) before saving")
    return value[..., 0] if value.shape[-1] == 2 else value[..., :-1]


@functools.lru_cache(maxsize=4096)
def encoded_size(fmt: str, shape: tuple[int, ...], dtype: str) -> int:
    """Size of the file for any chunk of ``shape`` and ``dtype``, without a chunk in memory
    (a 2 GiB chunk must not cost 4 GB to ``stat``)."""
    kind = np.dtype(dtype)
    values = math.prod(shape) * kind.itemsize
    if fmt == "tiff" and kind != np.dtype(bool):  # bool is packed to bits: encoded below
        sink = _SizeSink()
        tifffile.imwrite(cast(IO[bytes], sink), shape=_tiff_image_shape(shape), dtype=kind,
                         **_tiff_photometric(shape, kind), metadata={"shape": list(shape)})
        return sink.end
    if fmt == "npy":
        header = {"descr": np.lib.format.dtype_to_descr(kind), "fortran_order": False,
                  "shape": shape}
        out = io.BytesIO()
        try:
            np.lib.format.write_array_header_1_0(out, header)
        except ValueError:  # over 64 KiB of header: numpy's np.save writes version 2.0
            out = io.BytesIO()
            np.lib.format.write_array_header_2_0(out, header)
        return len(out.getvalue()) + values
    return len(_encode(fmt, np.zeros(shape, dtype=kind)))


def _tiff_image_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """0-d and 1-d chunks are written as one row (tifffile fails on some of them as they
    are); the shape description restores the exact shape."""
    return shape if len(shape) >= 2 else (1, math.prod(shape))


class _SizeSink(io.RawIOBase):
    """A seekable file that keeps no bytes, only how long the file would be."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = self.end = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.pos += n
        self.end = max(self.end, self.pos)
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.end}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def truncate(self, size: int | None = None) -> int:
        self.end = self.pos if size is None else size
        return self.end


@functools.lru_cache(maxsize=1024)
def _template(fmt: str, shape: tuple[int, ...], dtype: str) -> tuple[bytes, bytes] | None:
    """(prefix, suffix) around the values in every file of this shape and dtype, or None
    (PNG, multi-page TIFF): found by writing two chunks whose every value byte differs and
    checking the files differ in exactly one run of ``nbytes``."""
    if fmt == "png":
        return None
    kind = np.dtype(dtype)
    zeros = np.zeros(shape, dtype=kind)
    if kind == np.dtype(bool):
        probe = np.ones(shape, dtype=kind)
    else:
        probe = np.frombuffer(b"\xa5" * zeros.nbytes, dtype=kind).reshape(shape)
    blank, marked = _encode(fmt, zeros), _encode(fmt, probe)
    values = probe.tobytes()
    if len(blank) != len(marked) or not values:
        return None
    start = next((i for i, (a, b) in enumerate(zip(blank, marked, strict=True)) if a != b), None)
    if start is None:
        return None
    end = start + len(values)
    if marked[start:end] != values or blank[:start] != marked[:start]:
        return None
    if blank[end:] != marked[end:] or blank[start:end] != zeros.tobytes():
        return None
    return blank[:start], blank[end:]
