"""Storage transformer configuration: parsing and validating ``storage_transformers``.

zarrfuse knows one transformer, ``concat-parts``; any other name is refused with an error
that names it, because silently ignoring a transformer would return wrong bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zarrfuse.errors import ConfigurationError, PartsError, WriteRefusedError

__all__ = ["CONCAT_PARTS", "ConcatParts", "Part", "parse_storage_transformers"]

CONCAT_PARTS = "concat-parts"
_FORBIDDEN_IN_KEY_SUFFIX = ("/", "\x00")


@dataclass(frozen=True)
class Part:
    """One part of a chunk: stored at ``chunk key + key_suffix``; ``size`` in bytes if fixed."""

    key_suffix: str
    size: int | None = None


def _parse_part(data: Any) -> Part:
    if not isinstance(data, dict):
        raise ConfigurationError(f"concat-parts: a part must be an object, got {data!r}")
    unknown = set(data) - {"key_suffix", "size"}
    if unknown:
        raise ConfigurationError(
            f"concat-parts: part {data!r} has unknown members {sorted(unknown)}"
        )
    if "key_suffix" not in data:
        raise ConfigurationError(f"concat-parts: part {data!r} has no 'key_suffix'")
    suffix = data["key_suffix"]
    if not isinstance(suffix, str):
        raise ConfigurationError(f"concat-parts: key_suffix must be a string, got {suffix!r}")
    for bad in _FORBIDDEN_IN_KEY_SUFFIX:
        if bad in suffix:
            raise ConfigurationError(f"concat-parts: key_suffix {suffix!r} contains {bad!r}")
    size = data.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ConfigurationError(
            f"concat-parts: size of part {suffix!r} must be a non-negative integer, got {size!r}"
        )
    return Part(suffix, size)


@dataclass(frozen=True)
class ConcatParts:
    """A validated ``concat-parts`` configuration: the parts of every chunk, in order."""

    parts: tuple[Part, ...]

    @classmethod
    def from_config(cls, config: Any) -> ConcatParts:
        """Validate the ``configuration`` object of a ``concat-parts`` transformer."""
        if not isinstance(config, dict) or set(config) != {"parts"}:
            raise ConfigurationError(
                f"concat-parts: configuration must be an object with only 'parts', got {config!r}"
            )
        raw = config["parts"]
        if not isinstance(raw, list) or not raw:
            raise ConfigurationError("concat-parts: 'parts' must be a non-empty list")
        parts = tuple(_parse_part(p) for p in raw)
        suffixes = [p.key_suffix for p in parts]
        if len(set(suffixes)) != len(suffixes):
            raise ConfigurationError(f"concat-parts: key_suffix values repeat: {suffixes}")
        return cls(parts)

    def to_json(self) -> dict[str, Any]:
        """The ``storage_transformers`` entry, as written into ``zarr.json``."""
        parts = [
            {"key_suffix": p.key_suffix} | ({} if p.size is None else {"size": p.size})
            for p in self.parts
        ]
        return {"name": CONCAT_PARTS, "configuration": {"parts": parts}}

    @property
    def sizes(self) -> tuple[int | None, ...]:
        return tuple(p.size for p in self.parts)

    @property
    def fixed_size(self) -> int:
        """Bytes taken by the sized parts together."""
        return sum(p.size for p in self.parts if p.size is not None)

    def check_writable(self) -> None:
        """Writing needs every size but one; otherwise a value cannot be split unambiguously."""
        unsized = [p.key_suffix for p in self.parts if p.size is None]
        if len(unsized) > 1:
            raise ConfigurationError(
                f"concat-parts: parts {unsized} have no size; at most one may be unsized "
                "for the array to be written"
            )

    def checked_sizes(
        self, chunk_key: str, keys: Sequence[str], sizes: Sequence[int | None]
    ) -> tuple[int, ...] | None:
        """The parts' sizes if the chunk is whole; None if every part is absent (the chunk
        is absent). PartsError, naming the keys, for some parts missing or a sized part of
        another size: never fill value or garbage for a broken chunk."""
        if all(size is None for size in sizes):
            return None
        missing = [k for k, size in zip(keys, sizes, strict=True) if size is None]
        if missing:
            raise PartsError(f"chunk {chunk_key!r} is incomplete: missing parts {missing}")
        for part, key, size in zip(self.parts, keys, sizes, strict=True):
            if part.size is not None and size != part.size:
                raise PartsError(
                    f"chunk {chunk_key!r}: part {key!r} has {size} bytes where {part.size} "
                    "are expected"
                )
        return tuple(size for size in sizes if size is not None)

    def split(self, length: int) -> list[tuple[int, int]]:
        """``[start, stop)`` of each part within a value of ``length`` bytes.

        Sized parts before the unsized one take the leading bytes, those after it the trailing
        bytes, and the unsized part the rest. A value that cannot be split exactly is refused.
        """
        self.check_writable()
        fixed = self.fixed_size
        has_unsized = any(p.size is None for p in self.parts)
        if length < fixed or (not has_unsized and length != fixed):
            expected = f"at least {fixed}" if has_unsized else f"exactly {fixed}"
            raise WriteRefusedError(
                f"concat-parts: a chunk of {length} bytes cannot be split into parts of "
                f"{list(self.sizes)} bytes (needs {expected} bytes); nothing was written"
            )
        spans = []
        offset = 0
        for part in self.parts:
            size = length - fixed if part.size is None else part.size
            spans.append((offset, offset + size))
            offset += size
        return spans


def parse_storage_transformers(data: Any) -> ConcatParts | None:
    """The transformer zarrfuse must apply for ``storage_transformers``, or None if there is none.

    Unknown transformers, malformed entries and more than one ``concat-parts`` are refused.
    """
    if data is None or data == [] or data == ():
        return None
    if not isinstance(data, list | tuple):
        raise ConfigurationError(f"storage_transformers must be a list, got {data!r}")
    found: list[ConcatParts] = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigurationError(f"invalid storage transformer entry {entry!r}")
        if entry["name"] != CONCAT_PARTS:
            raise ConfigurationError(
                f"unknown storage transformer {entry['name']!r}; zarrfuse supports only "
                f"{CONCAT_PARTS!r}"
            )
        found.append(ConcatParts.from_config(entry.get("configuration")))
    if len(found) > 1:
        raise ConfigurationError("more than one concat-parts storage transformer is not supported")
    return found[0]
