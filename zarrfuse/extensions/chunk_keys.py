"""Chunk key encodings: ``fanout`` and ``suffix`` as zarr plugins, and strict decoding for all.

zarr-python's decoders are lax or broken (3.1's ``DefaultChunkKeyEncoding.decode_chunk_key(
"c/1/2")`` raises), and a filesystem must map a path to exactly one chunk or none. So every
encoding is decoded here, accepting only the canonical key (ASCII digits, no signs, blanks,
underscores or leading zeros where the encoding writes none, fanout's exact group widths,
the known number of dimensions); anything else is a ChunkKeyError. ``fanout`` and
``suffix`` are registered through the ``zarr.chunk_key_encoding`` entry-point group, so
plain zarr uses them.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from zarrfuse.errors import ChunkKeyError, ConfigurationError
from zarrfuse.zarr_compat import (
    ChunkKeyEncoding,
    DefaultChunkKeyEncoding,
    V2ChunkKeyEncoding,
    parse_chunk_key_encoding,
)

__all__ = [
    "FanoutChunkKeyEncoding", "RememberedKeys", "SuffixChunkKeyEncoding", "decode_chunk_key",
    "encode_chunk_key", "keys_per_directory", "parse_encoding"
]

_FORBIDDEN_IN_SUFFIX = ("/", "\\", "\x00", "..")
_BASE_ENCODING_SPELLINGS = ("base_encoding", "base-encoding")


def _canonical(text: str) -> bool:
    """``0`` or ASCII digits without a leading zero: the one rule for every coordinate in a
    key or a path. String methods: a third of a regular expression's cost, paid per name of a
    big directory."""
    return text.isascii() and text.isdigit() and (text[0] != "0" or text == "0")


def canonical_coordinate(text: str) -> int | None:
    """The coordinate a key component names, None unless it is canonical (``_canonical``)."""
    return int(text) if _canonical(text) else None


def _parse_canonical_int(text: str, key: str) -> int:
    value = canonical_coordinate(text)
    if value is None:
        raise ChunkKeyError(f"invalid chunk key {key!r}: {text!r} is not a canonical coordinate")
    return value


def _check_ndim(coords: tuple[int, ...], ndim: int | None, key: str) -> tuple[int, ...]:
    if ndim is not None and len(coords) != ndim:
        raise ChunkKeyError(
            f"invalid chunk key {key!r}: {len(coords)} coordinates for a {ndim}-dimensional grid"
        )
    return coords


def _checked_coords(chunk_coords: tuple[int, ...]) -> tuple[int, ...]:
    """Coordinates as plain non-negative ints; refuses negatives, bools and non-integers."""
    out = []
    for c in chunk_coords:
        if isinstance(c, bool):
            raise ValueError(f"chunk coordinates must be integers, got {c!r}")
        value = operator.index(c)
        if value < 0:
            raise ValueError(f"chunk coordinates must be non-negative, got {tuple(chunk_coords)}")
        out.append(value)
    return tuple(out)


def _decode_separated(key: str, separator: str) -> tuple[int, ...]:
    parts = key.split(separator)
    if not all(map(_canonical, parts)):  # no call per part: a big directory decodes each name
        for part in parts:
            _parse_canonical_int(part, key)  # raises at the first that is not canonical
    return tuple(map(int, parts))


def decode_default(key: str, separator: str = "/", ndim: int | None = None) -> tuple[int, ...]:
    """Strictly decode a ``default`` key (``c``, ``c/1/23``, ``c.1.23``)."""
    if key == "c":
        return _check_ndim((), ndim, key)
    prefix = "c" + separator
    if not key.startswith(prefix):
        raise ChunkKeyError(f"invalid chunk key {key!r}: expected it to start with {prefix!r}")
    return _check_ndim(_decode_separated(key[len(prefix) :], separator), ndim, key)


def decode_v2(key: str, separator: str = ".", ndim: int | None = None) -> tuple[int, ...]:
    """Strictly decode a ``v2`` key. ``"0"`` is ``()`` only when ``ndim`` is 0, else ``(0,)``."""
    if ndim == 0:
        if key != "0":
            raise ChunkKeyError(f"invalid chunk key {key!r}: a 0-dimensional grid has key '0'")
        return ()
    return _check_ndim(_decode_separated(key, separator), ndim, key)


@dataclass(frozen=True)
class FanoutChunkKeyEncoding(ChunkKeyEncoding):
    """The ``fanout`` encoding: each coordinate split into fixed-width decimal groups.

    ``max_children`` is floored to a power of ten (250 -> 100); the effective value is what
    this object reports and serialises. No directory of the resulting tree holds more than
    ``max_children`` entries, and keys sort in the order of their coordinate tuples.
    """

    name: ClassVar[Literal["fanout"]] = "fanout"
    max_children: int = 1000

    def __post_init__(self) -> None:
        value = self.max_children
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"fanout max_children must be an integer, got {value!r}")
        if value < 100:
            raise ConfigurationError(f"fanout max_children must be at least 100, got {value}")
        object.__setattr__(self, "max_children", 10 ** (len(str(value)) - 1))

    @property
    def group_width(self) -> int:
        """Digits per directory level: the number of digits in ``max_children - 1``."""
        return len(str(self.max_children - 1))

    def encode_chunk_key(self, chunk_coords: tuple[int, ...]) -> str:
        width = self.group_width
        parts = ["c"]
        for coord in _checked_coords(chunk_coords):
            digits = str(coord)
            n_groups = -(-len(digits) // width)
            digits = digits.zfill(n_groups * width)
            parts.append(str(n_groups - 1))
            parts.extend(digits[i : i + width] for i in range(0, len(digits), width))
        return "/".join(parts)

    def decode_chunk_key(self, chunk_key: str, ndim: int | None = None) -> tuple[int, ...]:
        if chunk_key == "c":
            return _check_ndim((), ndim, chunk_key)
        if not chunk_key.startswith("c/"):
            raise ChunkKeyError(f"invalid chunk key {chunk_key!r}: expected it to start with 'c/'")
        width = self.group_width
        nodes = chunk_key[2:].split("/")
        coords = []
        i = 0
        while i < len(nodes):
            extra = _parse_canonical_int(nodes[i], chunk_key)
            groups = nodes[i + 1 : i + 2 + extra]
            if len(groups) != extra + 1:
                raise ChunkKeyError(f"invalid chunk key {chunk_key!r}: too few groups")
            for group in groups:
                if len(group) != width or not group.isascii() or not group.isdigit():
                    raise ChunkKeyError(
                        f"invalid chunk key {chunk_key!r}: {group!r} is not {width} digits"
                    )
            if extra > 0 and groups[0] == "0" * width:
                raise ChunkKeyError(f"invalid chunk key {chunk_key!r}: leading zero group")
            coords.append(int("".join(groups)))
            i += 2 + extra
        return _check_ndim(tuple(coords), ndim, chunk_key)


def _parse_base_encoding(value: Any) -> ChunkKeyEncoding:
    if isinstance(value, ChunkKeyEncoding):
        return value
    if not isinstance(value, str | dict):
        raise ConfigurationError(f"suffix base_encoding must be an object or a name, got {value!r}")
    return parse_encoding(value)


@dataclass(frozen=True)
class SuffixChunkKeyEncoding(ChunkKeyEncoding):
    """The ``suffix`` encoding: a base encoding's key with a fixed string appended (``.tiff``).

    Reads the base as ``base_encoding`` or ``base-encoding`` (not both), writes
    ``base_encoding``. Suffixes that could leave the array's directory or break a path
    (``/``, ``\\``, NUL, ``..``) are refused.
    """

    name: ClassVar[Literal["suffix"]] = "suffix"
    suffix: str
    base_encoding: ChunkKeyEncoding = field(default_factory=DefaultChunkKeyEncoding)

    def __post_init__(self) -> None:
        if not isinstance(self.suffix, str):
            raise ConfigurationError(f"suffix must be a string, got {self.suffix!r}")
        for bad in _FORBIDDEN_IN_SUFFIX:
            if bad in self.suffix:
                raise ConfigurationError(
                    f"suffix {self.suffix!r} is refused: it contains {bad!r}, which could make "
                    "a chunk key leave its array or break a path"
                )
        object.__setattr__(self, "base_encoding", _parse_base_encoding(self.base_encoding))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuffixChunkKeyEncoding:
        config = data.get("configuration")
        if not isinstance(config, dict) or "suffix" not in config:
            raise ConfigurationError(f"suffix chunk key encoding needs a 'suffix': {data!r}")
        spelled = [k for k in _BASE_ENCODING_SPELLINGS if k in config]
        if len(spelled) > 1:
            raise ConfigurationError(
                "suffix chunk key encoding has both 'base_encoding' and 'base-encoding'; "
                "give one"
            )
        unknown = set(config) - {"suffix", *_BASE_ENCODING_SPELLINGS}
        if unknown:
            raise ConfigurationError(
                f"suffix chunk key encoding has unknown members {sorted(unknown)}"
            )
        if spelled:
            return cls(suffix=config["suffix"], base_encoding=config[spelled[0]])
        return cls(suffix=config["suffix"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "configuration": {
                "suffix": self.suffix,
                "base_encoding": self.base_encoding.to_dict(),
            },
        }

    def encode_chunk_key(self, chunk_coords: tuple[int, ...]) -> str:
        return encode_chunk_key(self.base_encoding, chunk_coords) + self.suffix

    def decode_chunk_key(self, chunk_key: str, ndim: int | None = None) -> tuple[int, ...]:
        if not chunk_key.endswith(self.suffix):
            raise ChunkKeyError(
                f"invalid chunk key {chunk_key!r}: it does not end with {self.suffix!r}"
            )
        base_key = chunk_key[: len(chunk_key) - len(self.suffix)]
        return decode_chunk_key(self.base_encoding, base_key, ndim)


def encode_chunk_key(encoding: ChunkKeyEncoding, chunk_coords: tuple[int, ...]) -> str:
    """Encode with any encoding, refusing negative or non-integer coordinates first."""
    return encoding.encode_chunk_key(_checked_coords(chunk_coords))


class RememberedKeys:
    """Chunk keys under one encoding and prefix, each encoded once while it is in use: a
    read asks for a chunk's key (and its neighbours') several times, at some microseconds
    each. Bounded: forgotten all at once past ``limit``."""

    def __init__(self, encoding: ChunkKeyEncoding, prefix: str = "", limit: int = 65536):
        self._encoding = encoding
        self._prefix = prefix
        self._limit = limit
        self._keys: dict[tuple[int, ...], str] = {}

    def __call__(self, coords: tuple[int, ...]) -> str:
        key = self._keys.get(coords)
        if key is None:
            if len(self._keys) >= self._limit:
                self._keys.clear()
            key = self._keys[coords] = self._prefix + encode_chunk_key(self._encoding, coords)
        return key


def decode_chunk_key(
    encoding: ChunkKeyEncoding, chunk_key: str, ndim: int | None = None
) -> tuple[int, ...]:
    """Strictly decode ``chunk_key`` under ``encoding``; ``ndim`` checks the dimension count."""
    if isinstance(encoding, DefaultChunkKeyEncoding):  # the common case first
        return decode_default(chunk_key, encoding.separator, ndim)
    if isinstance(encoding, FanoutChunkKeyEncoding | SuffixChunkKeyEncoding):
        return encoding.decode_chunk_key(chunk_key, ndim)
    if isinstance(encoding, V2ChunkKeyEncoding):
        return decode_v2(chunk_key, encoding.separator, ndim)
    raise ConfigurationError(f"zarrfuse cannot decode keys of the {encoding.name!r} encoding")


def last_name_tail(encoding: ChunkKeyEncoding) -> str | None:
    """Where the last component of every key is the last coordinate in decimal followed by a
    fixed text (``/``-separated default and v2 keys: nothing; under ``suffix``: its suffix),
    that text; None for any other encoding. The keys of one row then differ only there, so
    naming a row of chunks needs one key encoded, not one per chunk (``find`` over 100,000
    chunks: about 2 us a chunk)."""
    if isinstance(encoding, SuffixChunkKeyEncoding):
        tail = last_name_tail(encoding.base_encoding)
        return None if tail is None else tail + encoding.suffix
    if isinstance(encoding, DefaultChunkKeyEncoding | V2ChunkKeyEncoding):
        return "" if encoding.separator == "/" else None
    return None


def keys_per_directory(encoding: ChunkKeyEncoding, grid: tuple[int, ...]) -> int:
    """The most chunk keys that one directory of the store can hold for this chunk grid.

    ``fanout`` bounds every directory by ``max_children``; ``/``-separated encodings put the
    last dimension's chunks in one directory; ``.``-separated ones put every chunk in one.
    """
    if isinstance(encoding, SuffixChunkKeyEncoding):
        return keys_per_directory(encoding.base_encoding, grid)
    if isinstance(encoding, FanoutChunkKeyEncoding):
        return encoding.max_children
    if not grid:
        return 1
    separator = getattr(encoding, "separator", "/")
    return grid[-1] if separator == "/" else math.prod(grid)


def parse_encoding(data: Any) -> ChunkKeyEncoding:
    """A chunk key encoding from its JSON (dict or name).

    Unknown or invalid encodings raise ConfigurationError.
    """
    if isinstance(data, str):
        data = {"name": data}
    try:
        return parse_chunk_key_encoding(data)
    except ConfigurationError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigurationError(f"invalid chunk key encoding {data!r}: {e}") from e
