"""The ``zarrfuse`` argument parser: commands, their arguments and argument types.

Parsing only: the handlers that run a command come from ``commands``, by name.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Mapping
from typing import NoReturn, TypeVar

from zarrfuse import __version__
from zarrfuse.cli.option_table import MOUNT_OPTIONS, MountOption
from zarrfuse.errors import ConfigurationError
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


def _add_mount_option(p: argparse.ArgumentParser, option: MountOption) -> None:
    """One declared mount option as a flag; None when not given, so files can layer."""
    if option.kind == "switch":
        p.add_argument(option.flag, dest=option.field, action="store_true", default=None,
                       help=option.help)
    elif option.kind == "toggle":
        p.add_argument(option.flag, dest=option.field, action=argparse.BooleanOptionalAction,
                       default=None, help=option.help)
    elif option.choices is not None:
        p.add_argument(option.flag, dest=option.field, choices=option.choices, default=None,
                       help=option.help)
    else:
        p.add_argument(
            option.flag, dest=option.field, metavar=option.metavar, help=option.help,
            type=_argparse_type(option.value, option.metavar or option.field),
        )


def _add_mount(commands: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = commands.add_parser(
        "mount",
        help="mount a Zarr v2 or v3 array or group",
        description="Mount SOURCE (a path, file:// URL, .zip store, s3://, az://, gs:// or "
        "https:// URL, or any URL zarr-python opens) at MOUNTPOINT. Returns once the mount "
        "is live, unless --foreground.",
    )
    p.add_argument("source", metavar="SOURCE", nargs="?", help="(may come from --config)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT", nargs="?", help="(may come from --config)")
    p.add_argument(
        "--config", metavar="FILE",
        help="a mount configuration file (one -o style option per line, plus source= and "
        "mountpoint=); flags given here override it",
    )
    p.add_argument(
        "--foreground", action="store_true", help="serve in this process until unmounted"
    )
    p.add_argument(
        "-o", dest="fuse_options", metavar="OPTS", action="append", default=[],
        help="comma-separated FUSE options (allow_other, ...); repeatable",
    )
    _add_storage_option(p)
    for option in MOUNT_OPTIONS:
        _add_mount_option(p, option)
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
        help="describe an array or group: axes, chunks, OME-Zarr channels and levels, views",
        description="Print what the array at SOURCE (or every array under the group at "
        "SOURCE) is: axes with names and sizes, chunk and shard shapes, codecs; for an "
        "OME-Zarr image its channels, colours and levels; per view (--format), how many "
        "files a mount shows and where the first is; for a dual-access array whether "
        "every shard is a Zarr shard and a TIFF "
        "file. When it is not, the line says why.",
    )
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (nodes, OME-Zarr images, views) for scripts")
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


class _Parser(argparse.ArgumentParser):
    """argparse, plus the nearest option named for an unknown one (``--readonly``)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            near = _nearest_options(self, message.split(":", 1)[1].split())
            if near:
                message += "; did you mean " + ", ".join(near) + "?"
        super().error(message)


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found: set[str] = set()
    for action in parser._actions:  # argparse keeps no public list of them
        found.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def _nearest_options(parser: argparse.ArgumentParser, given: list[str]) -> list[str]:
    known = sorted(_option_strings(parser))
    out = []
    for word in given:
        if word.startswith("--"):
            match = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
            if match:
                out.append(match[0])
    return out


def build_parser(handlers: Handlers) -> argparse.ArgumentParser:
    """The ``zarrfuse`` argument parser and its subcommands; ``handlers`` by command name."""
    parser = _Parser(
        prog="zarrfuse",
        description="Zarr v2 and v3 arrays as ordinary files, one file per chunk.",
    )
    parser.add_argument("--version", action="version", version=f"zarrfuse {__version__}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    _add_mount(commands, handlers)
    p: argparse.ArgumentParser = commands.add_parser(
        "umount", help="unmount a zarrfuse mount (lazily if dead or busy)")
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
        "log", help="print a mount's recent log lines (why a write was refused, ...)",
        description="Ask the daemon serving MOUNTPOINT for its last log lines, over its "
        "control socket; says on stderr where its whole log is (the --log-file, syslog, or "
        "the default file a background mount writes).",
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("-n", "--lines", metavar="N", type=_positive_int, default=None,
                   help="only the last N lines")
    p.set_defaults(handler=handlers["log"])
    p = _source_command(
        commands, "verify", handlers["verify"],
        help="decode every stored chunk; report those that fail",
        description="Decode every stored chunk of the array at SOURCE, or of every array "
        "under the group at SOURCE, with the array's own codecs. Prints each chunk that "
        "fails and exits 1 if any did. Shows a progress bar on stderr when it is a terminal.",
    )
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
    _add_tiff_commands(commands, handlers)
    p = commands.add_parser(
        "demo", help="mount a real picture as image files and check them",
        description="Write a photograph (scikit-image's astronaut, no download) as a small "
        "OME-Zarr pyramid, mount it as TIFF files (one per chunk) and as one OME-TIFF, print "
        "the files to open, check every pixel, keep the mounts until Enter when run from a "
        "terminal, then unmount and remove everything.",
    )
    p.add_argument(
        "dir", metavar="DIR", nargs="?",
        help="put the demo here and keep it (default: a temporary directory, removed)",
    )
    p.add_argument("--hold", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the mounts until Enter (or Ctrl-C; with no terminal, until "
                   "SIGTERM), to open the pictures (default: when run from a terminal)")
    p.set_defaults(handler=handlers["demo"])
    p = commands.add_parser(
        "desktop", help="mount Zarr folders from the file manager",
        description="install: add 'Mount as images' and 'Mount as one image (OME-TIFF)' to "
        "this user's file-manager context menus (pcmanfm, Caja, Nemo, Thunar, Nautilus, "
        "Dolphin); folders still open as before. uninstall: remove them. open FOLDER: mount "
        "FOLDER read-only under $XDG_RUNTIME_DIR/zarrfuse and open it.",
    )
    p.add_argument("action", choices=["install", "uninstall", "open"])
    p.add_argument("folder", metavar="FOLDER", nargs="?", help="the Zarr folder (open)")
    p.add_argument("--format", choices=["tiff", "ome-tiff"], default="tiff",
                   help="open: one image per chunk (tiff, default) or one image (ome-tiff)")
    p.add_argument("--no-open", action="store_true", help="mount, print the path, open nothing")
    p.set_defaults(handler=handlers["desktop"])
    return parser
