"""The mount options, declared once: every place that spells an option is generated from here.

``zarrfuse mount``'s flags (:mod:`zarrfuse.cli.parser`), the ``-o`` words of fstab, mount(8)
and configuration files (:mod:`zarrfuse.cli.options`), which flags reach ``MountConfig``
(:mod:`zarrfuse.cli.commands`) and the documentation's table (:func:`markdown_table`) all read
``MOUNT_OPTIONS``. The daemon receives the resulting ``MountConfig`` whole, as JSON on a pipe.
A test checks that the table covers every ``MountConfig`` field a user can set.

An option's value is parsed from the words a user writes (``10G``, ``027``, ``alice``); a
bad one raises ConfigurationError naming the option and the value, so the same text serves a
flag, an ``-o`` word and a line of a configuration file.
"""

from __future__ import annotations

import grp
import pwd
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.images.colour_axis import COLOUR_CHOICES
from zarrfuse.filesystem.images.formats import SHOWN_FORMATS
from zarrfuse.fuse.config import MountConfig

__all__ = ["MOUNT_OPTIONS", "MountOption", "by_word", "markdown_table", "nonempty", "switch"]

Kind = Literal["value", "switch", "toggle"]
"""value: ``--flag X`` / ``word=X``; switch: ``--flag`` / ``word[=yes|no]``; toggle: both
``--flag``/``--no-flag`` and ``word``/``no_word``."""


@dataclass(frozen=True)
class MountOption:
    """One mount option: the ``MountConfig`` field it sets and how users spell it."""

    field: str
    help: str
    kind: Kind = "value"
    metavar: str | None = None
    parse: Callable[[str, str], Any] | None = None
    """``parse(word, text)``: the field's value; raises ConfigurationError naming both."""
    choices: tuple[str, ...] | None = None
    words: tuple[str, ...] = ()
    """Extra ``-o`` words that turn a switch on (``ro``)."""
    off_words: tuple[str, ...] = ()
    """Extra ``-o`` words that turn a switch off (``rw``; toggles also get ``no_NAME``)."""

    @property
    def word(self) -> str:
        """The ``-o`` word: the field's name (dashes also accepted)."""
        return self.field

    @property
    def flag(self) -> str:
        """The ``zarrfuse mount`` flag."""
        return "--" + self.field.replace("_", "-")

    def negated_by(self, word: str) -> bool:
        """Whether ``word`` (one of this switch's words) turns it off."""
        return word in self.off_words or (self.kind == "toggle" and word == "no_" + self.word)

    def value(self, text: str) -> Any:
        """The field's value for ``word=text``."""
        if self.choices is not None and text not in self.choices:
            raise ConfigurationError(f"{self.word}={text}: choose {', '.join(self.choices)}")
        return text if self.parse is None else self.parse(self.word, text)


def switch(name: str, text: str | None) -> bool:
    """yes/no (and their synonyms); a bare word (None) is yes."""
    word = "" if text is None else text.strip().lower()
    if word not in ("", "1", "yes", "true", "on", "0", "no", "false", "off"):
        raise ConfigurationError(f"{name}={text}: expected yes or no")
    return word in ("", "1", "yes", "true", "on")


def nonempty(name: str, text: str) -> str:
    """Any text but none."""
    if not text:
        raise ConfigurationError(f"{name}= needs a value")
    return text


def _at_least(least: int, what: str) -> Callable[[str, str], int]:
    """A decimal integer ``least`` or above (``what``: "positive", "non-negative")."""

    def parse(name: str, text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise ConfigurationError(f"{name}={text}: expected an integer") from None
        if value < least:
            raise ConfigurationError(f"{name}={text}: expected a {what} integer")
        return value

    return parse


def _octal_mask(name: str, text: str) -> int:
    """A umask written in octal (``022``, ``0o27``, ``0077``), 0 to 0o777."""
    try:
        value = int(text.strip().removeprefix("0o"), 8)
    except ValueError:
        raise ConfigurationError(f"umask {text!r}: expected an octal number such as 022") from None
    if not 0 <= value <= 0o777:
        raise ConfigurationError(f"umask {text!r}: must be between 000 and 777")
    return value


def _owner(name: str, text: str) -> int:
    """A uid or gid: a non-negative number, or a name from the password or group database."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid if name == "uid" else grp.getgrnam(text).gr_gid
    except KeyError:
        kind = "user" if name == "uid" else "group"
        raise ConfigurationError(f"{name} {text!r}: no such {kind}") from None


def _seconds(name: str, text: str) -> float:
    """A finite number of seconds, 0 or more (``metadata_ttl``)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ConfigurationError(f"{text!r}: expected a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigurationError(f"{text!r}: expected a finite number of seconds >= 0")
    return value


def _timeout(name: str, text: str) -> float:
    """A number of seconds above 0 (``store_timeout``)."""
    value = _seconds(name, text)
    if value <= 0:
        raise ConfigurationError(f"{text!r}: expected a number of seconds above 0")
    return value


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(name: str, text: str) -> int:
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


_positive = _at_least(1, "positive")
_non_negative = _at_least(0, "non-negative")


_DEFAULT = MountConfig(source="", mountpoint="")

MOUNT_OPTIONS: tuple[MountOption, ...] = (
    MountOption(
        "format", choices=SHOWN_FORMATS,
        help="raw: chunk files are the stored bytes (default); tiff, npy, png: every chunk "
        "rendered as an image file, readable and writable; ome-tiff: every array as one "
        "tiled OME-TIFF file (NAME.ome.tif, pyramidal for OME-Zarr multiscales), read-only",
    ),
    MountOption(
        "update_pyramid", kind="toggle",
        help="after a write to an OME-Zarr image's full resolution, recompute the region in "
        "every lower level with the metadata's method (nearest or mean; none named: "
        "ome-zarr-py's resize; others: one log line names the stale levels) (default: on)",
    ),
    MountOption(
        "watch", kind="toggle",
        help="show changes other programs (zarr-python, another mount) make to a local "
        "store's chunks within about a second, in every view (default: on; --no-watch: "
        "after --metadata-ttl only)",
    ),
    MountOption(
        "colour", choices=COLOUR_CHOICES,
        help="whole images (ome-tiff): auto shows an image's 3 or 4 uint8/uint16 channels as "
        "one colour picture where its OME-Zarr omero metadata says they are red, green, blue "
        "(default); always wherever a channel axis holds 3 or 4 of them; never keeps every "
        "channel grey",
    ),
    MountOption(
        "read_only", kind="switch", words=("ro",), off_words=("rw",),
        help="refuse all writes",
    ),
    MountOption(
        "nonempty", kind="switch",
        help="mount over a folder that has entries without the one-line warning (they are "
        "hidden until unmount)",
    ),
    MountOption("suffix", metavar="S", help="file suffix of chunk files (default: derived)"),
    MountOption(
        "max_children", metavar="N", parse=_positive,
        help="fanout: at most N entries per directory (default: derived)",
    ),
    MountOption(
        "layout", choices=("fanout", "source"),
        help="fanout: chunk files named with a suffix in a fanout tree (default); source: at "
        "each array's own keys, readable by every Zarr implementation (raw format only)",
    ),
    MountOption("debug", kind="switch", help="debug logging and tracebacks"),
    MountOption(
        "log_file", metavar="PATH", parse=nonempty, help="log here instead of stderr"
    ),
    MountOption(
        "verify", kind="toggle",
        help="check every written chunk against the array's codecs before storing it and "
        "refuse (EIO) what zarr could not decode (default: on; --no-verify stores any bytes)",
    ),
    MountOption(
        "max_chunk_bytes", metavar="N", parse=_positive,
        help="largest chunk file a write may make (default: derived from the chunk); in "
        "rendered views also the largest decoded chunk shown (default: 2 GiB)",
    ),
    MountOption(
        "store_timeout", metavar="SECONDS", parse=_timeout,
        help="answer EIO to a lookup, stat, listing, open or read that waited this long for "
        "the store, and to a close on S3, Azure or GCS whose write the store did not take "
        f"by then (it never will) (default: {_DEFAULT.store_timeout:g})",
    ),
    MountOption(
        "allow_redirects", kind="switch",
        help="web sources (http, https): follow a redirect to another host (default: refused, "
        "EIO; a redirect within the source's host is followed)",
    ),
    MountOption(
        "cache_dir", metavar="DIR", parse=nonempty,
        help="keep chunk bytes fetched from a remote store (S3, HTTP) in DIR, across mounts "
        "and shared by concurrent ones (default: no disk cache)",
    ),
    MountOption(
        "cache_size", metavar="SIZE", parse=_size,
        help="most bytes the disk cache keeps, least recently used out first; K, M, G, T "
        f"(default: {_DEFAULT.cache_size >> 30}G)",
    ),
    MountOption(
        "scratch_mb", metavar="N", parse=_non_negative,
        help="memory for temporary files (rsync's, editors'); 0 refuses them "
        f"(default: {_DEFAULT.scratch_mb})",
    ),
    MountOption(
        "uid", metavar="USER", parse=_owner,
        help="owner shown for every file (number or name; default: the mounting user)",
    ),
    MountOption(
        "gid", metavar="GROUP", parse=_owner,
        help="group shown for every file (number or name; default: the mounting user's)",
    ),
    MountOption(
        "umask", metavar="OOO", parse=_octal_mask,
        help="octal permission bits removed from 0777 (directories) and 0666 (files) "
        f"(default: {_DEFAULT.umask:03o}); read-only mounts also drop write bits",
    ),
    MountOption(
        "cache_mb", metavar="N", parse=_non_negative,
        help=f"memory for recently rendered chunks (default: {_DEFAULT.cache_mb})",
    ),
    MountOption(
        "metadata_ttl", metavar="SECONDS", parse=_seconds,
        help="trust listings (which chunks exist, their sizes) this long before asking the "
        "store again, here and in the kernel's caches (default: for the mount's life if "
        "read-only, 1 s if writable; while a writable mount watches its store, its listings "
        "without end and the kernel's chunk files for an hour, which setting it turns off)",
    ),
    MountOption(
        "symlink_root", metavar="DIR", parse=nonempty,
        help="let symlinks in a local store lead anywhere under DIR, an ancestor of the store "
        "(git-annex, DataLad datasets); by default nothing outside the store is ever read",
    ),
)

NOT_OPTIONS = frozenset({"source", "mountpoint", "foreground", "fuse_options", "storage_options"})
"""MountConfig fields that are not options: positional, per-invocation, or collected from
repeated ``-o`` / ``--storage-option``."""


def by_word() -> dict[str, MountOption]:
    """Every option by the ``-o`` words that name it (its field's name, ``ro``, ``rw``)."""
    out: dict[str, MountOption] = {}
    for option in MOUNT_OPTIONS:
        out[option.word] = option
        for word in (*option.words, *option.off_words):
            out[word] = option
        if option.kind == "toggle":
            out["no_" + option.word] = option
    return out


def _word_cell(option: MountOption) -> str:
    if option.kind == "value":
        return f"`{option.word}={option.metavar or '|'.join(option.choices or ())}`"
    if option.kind == "toggle":
        return f"`{option.word}`, `no_{option.word}`"
    return ", ".join(f"`{w}`" for w in (option.word, *option.words, *option.off_words))


def _flag_cell(option: MountOption) -> str:
    if option.kind == "value":
        return f"`{option.flag} {option.metavar or '{' + ','.join(option.choices or ()) + '}'}`"
    if option.kind == "toggle":
        return f"`{option.flag}`, `--no-{option.flag[2:]}`"
    return f"`{option.flag}`"


def markdown_table() -> str:
    """The documentation's table of mount options (``-o`` word, flag, meaning)."""
    rows = ["| `-o` word | `zarrfuse mount` flag | meaning |", "|---|---|---|"]
    for option in MOUNT_OPTIONS:
        meaning = option.help.replace("|", "\\|")
        rows.append(f"| {_word_cell(option)} | {_flag_cell(option)} | {meaning} |")
    rows.append(
        "| `storage_option.KEY=VALUE` | `--storage-option KEY=VALUE` | passed to the store "
        "(fsspec / obstore option names); repeatable |"
    )
    return "\n".join(rows) + "\n"
