"""Mount options as words: the ``-o`` vocabulary of fstab and mount(8), and config files.

One vocabulary serves three places, so an option is spelled the same everywhere:

- ``mount -t fuse.zarrfuse SOURCE DIR -o ro,suffix=.tiff,allow_other`` and ``/etc/fstab``
  (through ``mount.fuse.zarrfuse``, see :mod:`zarrfuse.cli.mount_helper`);
- mount configuration files, one option per line (``zarrfuse mount --config FILE``, used by
  the ``zarrfuse@.service`` systemd unit), which add ``source=`` and ``mountpoint=``;
- nothing else: ``zarrfuse mount``'s own ``-o`` stays plain FUSE options, as documented.

The words (``NAME`` alone means ``NAME=yes`` for switches):

=============================  ========================================================
``ro`` / ``rw``                read-only / writable (``read_only=yes|no`` also works)
``suffix=S``                   ``--suffix``
``max_children=N``             ``--max-children``
``verify``, ``no_verify``      ``--verify`` (the default), ``--no-verify``
``max_chunk_bytes=N``          ``--max-chunk-bytes``
``scratch_mb=N``               ``--scratch-mb``
``format=F``                   ``--format`` (raw, tiff, npy, png, ome-tiff)
``cache_mb=N``                 ``--cache-mb``
``layout=L``                   ``--layout`` (fanout, source)
``metadata_ttl=S``             ``--metadata-ttl`` (seconds)
``symlink_root=DIR``           ``--symlink-root``
``cache_dir=DIR``              ``--cache-dir``
``cache_size=SIZE``            ``--cache-size`` (bytes; K, M, G, T)
``store_timeout=S``            ``--store-timeout`` (seconds)
``uid=U``, ``gid=G``           ``--uid``, ``--gid`` (numbers or names)
``umask=OOO``                  ``--umask`` (octal)
``debug``                      ``--debug``
``log_file=PATH``              ``--log-file``
``storage_option.KEY=VALUE``   ``--storage-option KEY=VALUE``
=============================  ========================================================

Dashes in these names may be written as underscores or dashes (``max-children``). Options
that only mean something to mount(8) or systemd (``defaults``, ``auto``, ``noauto``, ``user``,
``users``, ``nouser``, ``owner``, ``group``, ``nofail``, ``_netdev``, ``comment=…``,
``x-…``) are ignored, as are VFS flags the kernel's FUSE mount does not take (``relatime``,
``strictatime``, ``lazytime``, ``nodiratime``, ``diratime``, ``iversion``, ``mand``,
``silent``, ``loud`` and their ``no`` forms; libfuse refuses them, and FUSE mounts are
``relatime`` anyway). Every other option is a FUSE option and passes through to the kernel
(``allow_other``, ``nosuid``, ``noexec``, ``auto_unmount``, ``max_read=N``...); libfuse
refuses the ones it does not know, and the mount fails saying so.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.images.formats import SHOWN_FORMATS
from zarrfuse.fuse.config import MountConfig

__all__ = [
    "ParsedOptions",
    "parse_group",
    "parse_octal_mask",
    "parse_options",
    "parse_seconds",
    "parse_user",
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
_TRUE = frozenset({"", "1", "yes", "true", "on"})
_FALSE = frozenset({"0", "no", "false", "off"})
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


def _positive(name: str, text: str) -> int:
    value = _integer(name, text)
    if value <= 0:
        raise ConfigurationError(f"{name}={text}: expected a positive integer")
    return value


def _non_negative(name: str, text: str) -> int:
    value = _integer(name, text)
    if value < 0:
        raise ConfigurationError(f"{name}={text}: expected a non-negative integer")
    return value


def _integer(name: str, text: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ConfigurationError(f"{name}={text}: expected an integer") from None


def _switch(name: str, text: str | None) -> bool:
    word = "" if text is None else text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ConfigurationError(f"{name}={text}: expected yes or no")


def parse_octal_mask(text: str) -> int:
    """A umask written in octal (``022``, ``0o27``, ``0077``), 0 to 0o777."""
    try:
        value = int(text.strip().removeprefix("0o"), 8)
    except ValueError:
        raise ConfigurationError(f"umask {text!r}: expected an octal number such as 022") from None
    if not 0 <= value <= 0o777:
        raise ConfigurationError(f"umask {text!r}: must be between 000 and 777")
    return value


def parse_user(text: str) -> int:
    """A uid: a non-negative number, or a user name from the password database."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ConfigurationError(f"uid {text!r}: no such user") from None


def parse_group(text: str) -> int:
    """A gid: a non-negative number, or a group name from the group database."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return grp.getgrnam(text).gr_gid
    except KeyError:
        raise ConfigurationError(f"gid {text!r}: no such group") from None


def _format(text: str) -> str:
    if text not in SHOWN_FORMATS:
        raise ConfigurationError(f"format={text}: choose {', '.join(SHOWN_FORMATS)}")
    return text


def _layout(text: str) -> str:
    if text not in ("fanout", "source"):
        raise ConfigurationError(f"layout={text}: choose fanout or source")
    return text


def parse_seconds(text: str) -> float:
    """A non-negative number of seconds (``metadata_ttl``)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ConfigurationError(f"{text!r}: expected a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigurationError(f"{text!r}: expected a finite number of seconds >= 0")
    return value


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """A byte count, with an optional K, M, G or T (powers of 1024): ``cache_size=10G``."""
    number, unit = text.strip(), ""
    if number[-1:].upper() in _SIZE_UNITS:
        number, unit = number[:-1], number[-1].upper()
    try:
        value = int(float(number) * _SIZE_UNITS[unit])
    except ValueError:
        raise ConfigurationError(f"{text!r}: expected a size such as 500M or 10G") from None
    if value <= 0:
        raise ConfigurationError(f"{text!r}: expected a size above 0")
    return value


def parse_timeout(text: str) -> float:
    """A number of seconds above 0 (``store_timeout``)."""
    value = parse_seconds(text)
    if value <= 0:
        raise ConfigurationError(f"{text!r}: expected a number of seconds above 0")
    return value


def _nonempty(name: str, text: str) -> str:
    if not text:
        raise ConfigurationError(f"{name}= needs a value")
    return text


# name -> (MountConfig field, converter of the value; None: a switch)
_VALUED = {
    "suffix": ("suffix", lambda n, v: v),
    "max_children": ("max_children", _positive),
    "max_chunk_bytes": ("max_chunk_bytes", _positive),
    "scratch_mb": ("scratch_mb", _non_negative),
    "format": ("format", lambda n, v: _format(v)),
    "cache_mb": ("cache_mb", _non_negative),
    "layout": ("layout", lambda n, v: _layout(v)),
    "uid": ("uid", lambda n, v: parse_user(v)),
    "gid": ("gid", lambda n, v: parse_group(v)),
    "umask": ("umask", lambda n, v: parse_octal_mask(v)),
    "log_file": ("log_file", _nonempty),
    "metadata_ttl": ("metadata_ttl", lambda n, v: parse_seconds(v)),
    "symlink_root": ("symlink_root", _nonempty),
    "cache_dir": ("cache_dir", _nonempty),
    "cache_size": ("cache_size", lambda n, v: parse_size(v)),
    "store_timeout": ("store_timeout", lambda n, v: parse_timeout(v)),
}
_SWITCHES = {"verify": "verify", "debug": "debug", "read_only": "read_only"}
# name -> the switch it turns off (``no_verify`` is ``verify=no``)
_NEGATED = {"no_verify": "verify"}
_KNOWN = {*_VALUED, *_SWITCHES, *_NEGATED, "ro", "rw", "source", "mountpoint"}


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
        if name in ("ro", "rw") and not sep:
            parsed.values["read_only"] = name == "ro"
        elif name in _SWITCHES:
            parsed.values[_SWITCHES[name]] = _switch(name, text)
        elif name in _NEGATED:
            parsed.values[_NEGATED[name]] = not _switch(name, text)
        elif name in _VALUED:
            if not sep:
                raise ConfigurationError(f"option {name} needs a value: {name}=...")
            target, convert = _VALUED[name]
            parsed.values[target] = convert(name, value)
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
            parsed.values[name] = _nonempty(name, value)
        elif name in _IGNORED or name.startswith(("x-", "comment=")) or raw_name == "comment":
            parsed.ignored.append(option)
        else:
            parsed.fuse_options.append(f"{name}={value}" if sep else name)
    return parsed


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
