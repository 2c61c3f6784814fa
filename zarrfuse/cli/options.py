"""Mount options as words: the ``-o`` vocabulary of fstab, mount(8) and config files.

One vocabulary, so an option is spelled the same everywhere: ``mount -t fuse.zarrfuse SOURCE
DIR -o ro,suffix=.tiff,allow_other`` and ``/etc/fstab`` (through ``mount_helper``), mount
configuration files (one option per line, plus ``source=`` and ``mountpoint=``: ``zarrfuse
mount --config FILE``, the ``zarrfuse@.service`` unit) and ``zarrfuse mount -o``. The words
are declared in :mod:`zarrfuse.cli.option_table`, plus ``storage_option.KEY=VALUE``; an
underscore in them may be written as a dash (``max-children``).

Words that only mean something to mount(8) or systemd (``noauto``, ``nofail``, ``x-…``,
``comment=…``...) are ignored, as are VFS flags the kernel's FUSE mount does not take
(``relatime``, ``lazytime``..., which libfuse refuses; FUSE mounts are ``relatime`` anyway).
Every other word is a FUSE option and passes through to the kernel (``allow_other``,
``max_read=N``...); libfuse refuses the ones it does not know, and the mount fails saying so.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zarrfuse.cli.option_table import by_word, nonempty, switch
from zarrfuse.errors import ConfigurationError
from zarrfuse.fuse.config import MountConfig

__all__ = [
    "ParsedOptions",
    "parse_options",
    "read_config_file",
    "split_option_list",
]

_IGNORED = frozenset(
    {
        "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail",
        "_netdev", "relatime", "norelatime", "strictatime", "nostrictatime", "lazytime",
        "nolazytime", "nodiratime", "diratime", "iversion", "noiversion", "mand", "nomand",
        "silent", "loud",
    }
)
_OPTIONS = by_word()
_KNOWN = {*_OPTIONS, "source", "mountpoint"}
STORAGE_OPTION_PREFIX = "storage_option."


@dataclass
class ParsedOptions:
    """What a list of options asked for: MountConfig fields, and the FUSE options left over.

    ``values`` holds only the fields the options named, so callers can layer them (a config
    file under command-line flags).
    """

    values: dict[str, Any] = field(default_factory=dict)
    fuse_options: list[str] = field(default_factory=list)
    storage_options: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def absolute_source(text: str) -> str:
    """A URL as given; a local path (or .zip file) made absolute, as the daemon runs in /."""
    if "://" in text:
        return text
    return os.path.abspath(os.path.expanduser(text))


def split_option_list(text: str) -> list[str]:
    """``a,b=c,d="x,y"`` into ``["a", "b=c", 'd=x,y']``: commas separate unless quoted.

    Double quotes group (as libmount allows in fstab); they are removed.
    """
    options: list[str] = []
    current: list[str] = []
    quoted = touched = False
    for char in text:
        if char == '"':
            quoted, touched = not quoted, True
        elif char == "," and not quoted:
            if current or touched:
                options.append("".join(current))
            current, touched = [], False
        else:
            current.append(char)
    if quoted:
        raise ConfigurationError(f"unbalanced double quote in options {text!r}")
    if current or touched:
        options.append("".join(current))
    return [o.strip() for o in options if o.strip()]


def _normalized(name: str) -> str:
    """Known names with dashes spelled as underscores; other names (FUSE's) as given."""
    candidate = name.replace("-", "_")
    if candidate in _KNOWN or candidate.startswith(STORAGE_OPTION_PREFIX[:-1]):
        return candidate
    return name


def parse_options(options: Iterable[str], *, allow_paths: bool = False) -> ParsedOptions:
    """Interpret ``NAME`` / ``NAME=VALUE`` words; raises ConfigurationError on a bad value.

    ``allow_paths`` (config files) also accepts ``source=`` and ``mountpoint=``.
    """
    parsed = ParsedOptions()
    for option in options:
        raw_name, sep, value = option.partition("=")
        name = _normalized(raw_name.strip())
        text = value if sep else None  # values keep their blanks: config files quote them
        declared = _OPTIONS.get(name)
        if declared is not None and declared.kind != "value":
            on = switch(name, text)
            parsed.values[declared.field] = not on if declared.negated_by(name) else on
        elif declared is not None:
            if not sep:
                raise ConfigurationError(f"option {name} needs a value: {name}=...")
            parsed.values[declared.field] = declared.value(value)
        elif name.startswith(STORAGE_OPTION_PREFIX[:-1]):
            prefixed = name.startswith(STORAGE_OPTION_PREFIX)
            key = name[len(STORAGE_OPTION_PREFIX) :] if prefixed else ""
            if not key or not sep:
                raise ConfigurationError(
                    f"{option!r}: storage options are written storage_option.KEY=VALUE"
                )
            parsed.storage_options[key] = value
        elif name in ("source", "mountpoint"):
            if not allow_paths:
                raise ConfigurationError(f"{name}= belongs in a mount configuration file")
            parsed.values[name] = nonempty(name, value)
        elif name in _IGNORED or name.startswith(("x-", "comment=")) or raw_name == "comment":
            parsed.ignored.append(option)
        else:
            _refuse_a_near_miss(name)
            parsed.fuse_options.append(f"{name}={value}" if sep else name)
    return parsed


LIBFUSE_WORDS = frozenset({
    "allow_other", "allow_root", "auto_unmount", "default_permissions", "fsname", "subtype",
    "max_read", "blkdev", "blksize", "ro", "rw", "suid", "nosuid", "dev", "nodev", "exec",
    "noexec", "async", "sync", "dirsync", "atime", "noatime", "diratime", "nodiratime",
    "rootmode", "user_id", "group_id", "context", "fscontext", "defcontext", "rootcontext",
    "debug", "max_write", "max_readahead", "max_background", "congestion_threshold",
    "async_read", "sync_read", "atomic_o_trunc", "clone_fd", "kernel_cache", "auto_cache",
    "direct_io", "entry_timeout", "attr_timeout", "negative_timeout", "writeback_cache",
    "max_idle_threads", "max_threads",
})
"""The ``-o`` words libfuse and mount(8) take: passed on, never taken for a typo."""


def _refuse_a_near_miss(name: str) -> None:
    """An unknown word close to one of zarrfuse's (``readonly``, ``metadata_tll``) is a
    typo: refused with the word meant, rather than passed to libfuse, which says only
    "unknown option"."""
    bare = name.partition("=")[0]
    if bare in LIBFUSE_WORDS:
        return
    near = difflib.get_close_matches(bare.replace("-", "_"), sorted(_KNOWN), n=1, cutoff=0.75)
    if near:
        raise ConfigurationError(f"unknown option {bare}; did you mean {near[0]}?")


def read_config_file(path: str) -> ParsedOptions:
    """A mount configuration file: one option per line, ``#`` comments, blank lines.

    Lines are the ``-o`` vocabulary (``suffix = .tiff``, ``allow_other``,
    ``storage_option.endpoint_url = http://...``) plus ``source =`` and ``mountpoint =``.
    Blanks around ``=`` are ignored; a value may be quoted with ``"`` or ``'`` to keep
    blanks. Relative paths (source, mountpoint, log_file) are taken relative to the file's
    directory. Raises ConfigurationError naming the file and line, OSError if unreadable.
    """
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    words = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if not name or " " in name:
            raise ConfigurationError(f"{path}:{number}: expected NAME or NAME = VALUE: {line!r}")
        words.append((number, f"{name}={value}" if sep else name))
    parsed = ParsedOptions()
    for number, word in words:
        try:
            one = parse_options([word], allow_paths=True)
        except ConfigurationError as e:
            raise ConfigurationError(f"{path}:{number}: {e}") from None
        parsed.values.update(one.values)
        parsed.fuse_options += one.fuse_options
        parsed.storage_options.update(one.storage_options)
        parsed.ignored += one.ignored
    base = os.path.dirname(os.path.abspath(path))
    for key in ("source", "mountpoint", "log_file"):
        given = parsed.values.get(key)
        if given is not None and "://" not in given:
            parsed.values[key] = os.path.normpath(os.path.join(base, os.path.expanduser(given)))
    return parsed


def config_from(parsed: ParsedOptions, **fields: Any) -> MountConfig:
    """A MountConfig from parsed options; ``fields`` (source, mountpoint...) come first."""
    values = {**parsed.values, **fields}
    missing = [k for k in ("source", "mountpoint") if not values.get(k)]
    if missing:
        raise ConfigurationError(f"no {' and no '.join(missing)} given")
    return MountConfig(
        **values,
        fuse_options=tuple(parsed.fuse_options),
        storage_options=dict(parsed.storage_options),
    )
