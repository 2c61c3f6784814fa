"""Values of mount options, from the words a user writes (``10G``, ``027``, ``alice``).

Each parser raises ConfigurationError with a message that names the option and the value,
so the same text serves a flag, an ``-o`` word and a line of a configuration file.
"""

from __future__ import annotations

import grp
import pwd

from zarrfuse.errors import ConfigurationError

__all__ = [
    "LAYOUTS",
    "choice",
    "integer",
    "non_negative",
    "nonempty",
    "parse_group",
    "parse_octal_mask",
    "parse_seconds",
    "parse_size",
    "parse_timeout",
    "parse_user",
    "positive",
    "switch",
]

_TRUE = frozenset({"", "1", "yes", "true", "on"})
_FALSE = frozenset({"0", "no", "false", "off"})
LAYOUTS = ("fanout", "source")


def positive(name: str, text: str) -> int:
    """An integer above 0."""
    value = integer(name, text)
    if value <= 0:
        raise ConfigurationError(f"{name}={text}: expected a positive integer")
    return value


def non_negative(name: str, text: str) -> int:
    """An integer 0 or above."""
    value = integer(name, text)
    if value < 0:
        raise ConfigurationError(f"{name}={text}: expected a non-negative integer")
    return value


def integer(name: str, text: str) -> int:
    """A decimal integer."""
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ConfigurationError(f"{name}={text}: expected an integer") from None


def switch(name: str, text: str | None) -> bool:
    """yes/no (and their synonyms); a bare word (None) is yes."""
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


def choice(name: str, text: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``, as given."""
    if text not in choices:
        raise ConfigurationError(f"{name}={text}: choose {', '.join(choices)}")
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


def nonempty(name: str, text: str) -> str:
    """Any text but none."""
    if not text:
        raise ConfigurationError(f"{name}= needs a value")
    return text
