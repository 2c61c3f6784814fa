"""The ``zarrfuse`` argument parser: commands, their arguments and argument types.

Parsing only: the handlers that run a command come from ``commands``, by name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import TypeVar

from zarrfuse import __version__
from zarrfuse.cli import options
from zarrfuse.errors import ConfigurationError
from zarrfuse.filesystem.images.formats import SHOWN_FORMATS
from zarrfuse.fuse.config import MountConfig
from zarrfuse.tiff.compression import COMPRESSIONS, DEFAULT_COMPRESSION

__all__ = ["Handler", "Handlers", "build_parser"]

Handler = Callable[[argparse.Namespace], int]
Handlers = Mapping[str, Handler]
T = TypeVar("T")


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


_positive_int.__name__ = "positive integer"  # argparse names the type in its error


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_non_negative_int.__name__ = "non-negative integer"


def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _argparse_type(parse: Callable[[str], T], name: str) -> Callable[[str], T]:
    """``parse`` for argparse: a ConfigurationError becomes its usage error."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ConfigurationError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = name
    return convert


def _ready_fd(text: str) -> int:
    value = int(text)
    if value < 3:
        raise ValueError(text)
    return value


def _add_storage_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-option", dest="storage_options", metavar="KEY=VALUE", type=_storage_option,
        action="append", default=[], help="passed to the store (fsspec); repeatable",
    )


def _add_mount(commands: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = commands.add_parser(
        "mount",
        help="mount a Zarr v2 or v3 array or group",
        description="Mount SOURCE (a path, file:// URL, .zip store or any URL zarr-python "
        "opens, e.g. s3://bucket/array) at MOUNTPOINT. Returns once the mount is live, "
        "unless --foreground.",
    )
    p.add_argument("source", metavar="SOURCE", nargs="?", help="(may come from --config)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT", nargs="?", help="(may come from --config)")
    p.add_argument(
        "--config", metavar="FILE",
        help="a mount configuration file (one -o style option per line, plus source= and "
        "mountpoint=); flags given here override it",
    )
    p.add_argument("--suffix", metavar="S", help="file suffix of chunk files (default: derived)")
    p.add_argument(
        "--max-children", metavar="N", type=_positive_int,
        help="fanout: at most N entries per directory (default: derived)",
    )
    p.add_argument("--read-only", action="store_true", default=None, help="refuse all writes")
    p.add_argument(
        "--foreground", action="store_true", help="serve in this process until unmounted"
    )
    p.add_argument(
        "-o", dest="fuse_options", metavar="OPTS", action="append", default=[],
        help="comma-separated FUSE options (allow_other, ...); repeatable",
    )
    p.add_argument(
        "--debug", action="store_true", default=None, help="debug logging and tracebacks"
    )
    p.add_argument("--log-file", metavar="PATH", help="log here instead of stderr")
    _add_storage_option(p)
    p.add_argument(
        "--verify", action=argparse.BooleanOptionalAction, default=None,
        help="check every written chunk against the array's codecs before storing it and "
        "refuse (EIO) what zarr could not decode (default: on; --no-verify stores any bytes)",
    )
    p.add_argument(
        "--max-chunk-bytes", metavar="N", type=_positive_int,
        help="largest chunk file a write may make (default: derived from the chunk); in "
        "rendered views also the largest decoded chunk shown (default: 2 GiB)",
    )
    p.add_argument(
        "--store-timeout", metavar="SECONDS",
        type=_argparse_type(options.parse_timeout, "seconds"),
        help="answer EIO to a lookup, stat, listing, open or read that waited this long for "
        f"the store (default: {MountConfig.store_timeout:g})",
    )
    p.add_argument(
        "--cache-dir", metavar="DIR",
        help="keep chunk bytes fetched from a remote store (S3, HTTP) in DIR, across mounts "
        "and shared by concurrent ones (default: no disk cache)",
    )
    p.add_argument(
        "--cache-size", metavar="SIZE", type=_argparse_type(options.parse_size, "size"),
        help="most bytes the disk cache keeps, least recently used out first "
        f"(default: {MountConfig.cache_size >> 30}G)",
    )
    p.add_argument(
        "--scratch-mb", metavar="N", type=_non_negative_int,
        help="memory for temporary files (rsync's, editors'); 0 refuses them "
        f"(default: {MountConfig.scratch_mb})",
    )
    p.add_argument(
        "--uid", metavar="USER", type=_argparse_type(options.parse_user, "user"),
        help="owner shown for every file (number or name; default: the mounting user)",
    )
    p.add_argument(
        "--gid", metavar="GROUP", type=_argparse_type(options.parse_group, "group"),
        help="group shown for every file (number or name; default: the mounting user's)",
    )
    p.add_argument(
        "--umask", metavar="OOO", type=_argparse_type(options.parse_octal_mask, "umask"),
        help="octal permission bits removed from 0777 (directories) and 0666 (files) "
        f"(default: {MountConfig.umask:03o}); read-only mounts also drop write bits",
    )
    p.add_argument(
        "--format", choices=SHOWN_FORMATS, default=None,
        help="raw: chunk files are the stored bytes (default); tiff, npy, png: every chunk "
        "rendered as an image file, readable and writable; ome-tiff: every array as one "
        "tiled OME-TIFF file (NAME.ome.tif, pyramidal for OME-Zarr multiscales), read-only",
    )
    p.add_argument(
        "--layout", choices=("fanout", "source"), default=None,
        help="fanout: chunk files named with a suffix in a fanout tree (default); source: at "
        "each array's own keys, readable by every Zarr implementation (raw format only)",
    )
    p.add_argument(
        "--cache-mb", metavar="N", type=_non_negative_int,
        help=f"memory for recently rendered chunks (default: {MountConfig.cache_mb})",
    )
    p.add_argument(
        "--metadata-ttl", metavar="SECONDS",
        type=_argparse_type(options.parse_seconds, "seconds"),
        help="trust listings (which chunks exist, their sizes) this long before asking the "
        "store again (default: for the mount's life if read-only, 1 s if writable)",
    )
    p.add_argument(
        "--symlink-root", metavar="DIR",
        help="let symlinks in a local store lead anywhere under DIR, an ancestor of the store "
        "(git-annex, DataLad datasets); by default nothing outside the store is ever read",
    )
    # Set only by the background parent on the daemon it spawns: report readiness here.
    p.add_argument("--ready-fd", type=_ready_fd, help=argparse.SUPPRESS)
    # ... and hand it its configuration as JSON on this descriptor (never on argv).
    p.add_argument("--config-fd", type=_ready_fd, help=argparse.SUPPRESS)
    p.set_defaults(handler=handlers["mount"], usage=p)


def _shape(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.replace("x", ",").split(","))
    if not values or any(v <= 0 for v in values):
        raise ValueError(text)
    return values


_shape.__name__ = "shape (positive integers separated by commas)"


def _source_command(
    commands: argparse._SubParsersAction, name: str, handler: Handler, help: str,
    description: str,
) -> argparse.ArgumentParser:
    """A subcommand that takes SOURCE and --debug."""
    p = commands.add_parser(name, help=help, description=description)
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("--debug", action="store_true", help="tracebacks for errors")
    p.set_defaults(handler=handler)
    return p


def _add_tiff_commands(commands: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = _source_command(
        commands, "info", handlers["info"],
        help="describe an array or group; say whether its shards are TIFF files",
        description="Print what the array at SOURCE (or every array under the group at "
        "SOURCE) is, and whether it is dual-access: every shard a Zarr shard and a TIFF "
        "file. When it is not, the line says why.",
    )
    _add_storage_option(p)
    p = _source_command(
        commands, "convert-tiff", handlers["convert-tiff"],
        help="copy an array or a TIFF image into a dual-access array",
        description="Copy SOURCE (any array zarrfuse opens, or a .tif/.tiff file) into a new "
        "array at DEST whose shards are TIFF files (suffix .tiff, concat-parts tiles and "
        "index, and with --header-part the header too). Shows a progress bar on stderr when "
        "it is a terminal.",
    )
    p.add_argument("dest", metavar="DEST")
    p.add_argument(
        "--tile", metavar="Y,X", type=_shape, default=(256, 256),
        help="TIFF tile (inner chunk) shape, multiples of 16 (default: 256,256)",
    )
    p.add_argument(
        "--shard-shape", metavar="N,...", type=_shape,
        help="shard shape over all axes (default: 1 along leading axes, 16x16 tiles)",
    )
    p.add_argument(
        "--compression", choices=COMPRESSIONS, default=DEFAULT_COMPRESSION,
        help="tile codec: deflate (TIFF Compression 8, which libtiff, GDAL, vips, OpenCV, "
        "Pillow and tifffile all decode), zstd (50000; about twice as fast to write, but "
        "OpenCV cannot read it) or none (default: %(default)s)",
    )
    samples = p.add_mutually_exclusive_group()
    samples.add_argument(
        "--samples", dest="samples", action="store_true", default=None,
        help="the last axis holds the samples of a pixel (RGB); default: as the TIFF says",
    )
    samples.add_argument("--no-samples", dest="samples", action="store_false")
    p.add_argument(
        "--bigtiff", action="store_true", default=None,
        help="write BigTIFF headers (default: only when a shard could exceed 4 GiB)",
    )
    p.add_argument(
        "--header-part", action="store_true",
        help="store each TIFF header in its own .header part: shard files hold pure tile "
        "bytes and are TIFFs only through a zarrfuse mount (default: header and tiles in the "
        "shard file, a TIFF on disk)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing DEST")
    p = _source_command(
        commands, "repair-tiff", handlers["repair-tiff"],
        help="rewrite stale TIFF headers of a dual-access array",
        description="Rebuild the TIFF header of every shard of the dual-access array at "
        "SOURCE whose header does not match its shard index (shards written by other Zarr "
        "implementations, edge shards after a resize). Zarr data is not changed.",
    )
    p.add_argument(
        "--check", action="store_true",
        help="only count stale headers; exit 1 if there are any, write nothing",
    )


def build_parser(handlers: Handlers) -> argparse.ArgumentParser:
    """The ``zarrfuse`` argument parser and its subcommands; ``handlers`` by command name."""
    parser = argparse.ArgumentParser(
        prog="zarrfuse",
        description="Zarr v2 and v3 arrays as ordinary files, one file per chunk.",
    )
    parser.add_argument("--version", action="version", version=f"zarrfuse {__version__}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    _add_mount(commands, handlers)
    p = commands.add_parser("umount", help="unmount a zarrfuse mount (lazily if dead or busy)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT", nargs="?")
    p.add_argument("--config", metavar="FILE", help="unmount the mountpoint this file names")
    p.add_argument(
        "--if-mounted", action="store_true",
        help="succeed quietly when nothing is mounted there (for systemd's ExecStopPost=)",
    )
    p.add_argument("--all", action="store_true",
                   help="unmount every zarrfuse mount of this user (root: every one)")
    p.set_defaults(handler=handlers["umount"], usage=p)
    p = commands.add_parser(
        "stats", help="show a mount's counters (requests, bytes, store requests, errors)",
        description="Ask the daemon serving MOUNTPOINT for its counters, over its control "
        "socket (never through the mount itself).",
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("--json", action="store_true", help="print the daemon's JSON document")
    p.set_defaults(handler=handlers["stats"])
    p = commands.add_parser(
        "verify", help="decode every stored chunk; report those that fail",
        description="Decode every stored chunk of the array at SOURCE, or of every array "
        "under the group at SOURCE, with the array's own codecs. Prints each chunk that "
        "fails and exits 1 if any did. Shows a progress bar on stderr when it is a terminal.",
    )
    p.add_argument("source", metavar="SOURCE")
    _add_storage_option(p)
    p.add_argument(
        "--jobs", metavar="N", type=_positive_int, default=8,
        help="chunks decoded at once (default: %(default)s)",
    )
    p.add_argument(
        "--repair", action="store_true",
        help="first finish or undo the multi-part commits a crashed writable mount left "
        "(what the next writable mount does before it serves)",
    )
    p.add_argument("--debug", action="store_true", help="tracebacks for errors")
    p.set_defaults(handler=handlers["verify"])
    _add_tiff_commands(commands, handlers)
    p = commands.add_parser("demo", help="mount a built-in demo array and show it")
    p.add_argument(
        "dir", metavar="DIR", nargs="?", help="where to put the demo (default: a temp dir)"
    )
    p.set_defaults(handler=handlers["demo"])
    p = commands.add_parser(
        "desktop", help="mount Zarr folders from the file manager",
        description="install: add 'Open as images (zarrfuse)' to this user's file managers "
        "(Open With, pcmanfm/Caja/Nemo context menus, Nautilus scripts). open FOLDER: mount "
        "FOLDER read-only as TIFF images under $XDG_RUNTIME_DIR/zarrfuse and open it.",
    )
    p.add_argument("action", choices=["install", "open"])
    p.add_argument("folder", metavar="FOLDER", nargs="?", help="the Zarr folder (open)")
    p.add_argument("--no-open", action="store_true", help="mount, print the path, open nothing")
    p.set_defaults(handler=handlers["desktop"])
    return parser
