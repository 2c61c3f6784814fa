"""The ``zarrfuse`` command: parse arguments into a frozen MountConfig and dispatch.

Nothing happens here beyond parsing and dispatch: mounting lives in ``daemon`` and ``mount``,
mountpoint handling in ``mountpoint``. Errors become one line on stderr, ``zarrfuse:
<message>``, and exit status 1 (usage errors: 2). Expected ones (every ZarrFuseError, and
OSError from bad paths) show just their message; anything else, a bug or a library error
nobody translated, also its type. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TypeVar

from zarrfuse import __version__, daemon, options
from zarrfuse.config import FORMATS, MountConfig
from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.mountpoint import is_mounted, unmount_or_detach

__all__ = ["build_parser", "main", "mount_config"]

Handler = Callable[[argparse.Namespace], int]
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


def _add_mount(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "mount",
        help="mount a Zarr v3 array or group",
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
        "--verify", action="store_true", default=None,
        help="decode every written chunk with the array's codecs; refuse what fails",
    )
    p.add_argument(
        "--max-chunk-bytes", metavar="N", type=_positive_int,
        help="largest chunk file a write may make (default: derived from the chunk)",
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
        "--format", choices=("raw", *FORMATS), default=None,
        help="raw: chunk files are the stored bytes (default); tiff, npy, png: every chunk "
        "rendered as an image file, readable and writable",
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
    # Set only by the background parent on the daemon it spawns: report readiness here.
    p.add_argument("--ready-fd", type=_ready_fd, help=argparse.SUPPRESS)
    p.set_defaults(handler=_mount, usage=p)


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


def _add_tiff_commands(commands: argparse._SubParsersAction) -> None:
    p = _source_command(
        commands, "info", _info,
        help="describe an array or group; say whether its shards are TIFF files",
        description="Print what the array at SOURCE (or every array under the group at "
        "SOURCE) is, and whether it is dual-access: every shard a Zarr shard and a TIFF "
        "file. When it is not, the line says why.",
    )
    _add_storage_option(p)
    p = _source_command(
        commands, "convert-tiff", _convert_tiff,
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
        "--compression", choices=("zstd", "none"), default="zstd",
        help="tile codec (default: %(default)s)",
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
        commands, "repair-tiff", _repair_tiff,
        help="rewrite stale TIFF headers of a dual-access array",
        description="Rebuild the TIFF header of every shard of the dual-access array at "
        "SOURCE whose header does not match its shard index (shards written by other Zarr "
        "implementations, edge shards after a resize). Zarr data is not changed.",
    )
    p.add_argument(
        "--check", action="store_true",
        help="only count stale headers; exit 1 if there are any, write nothing",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``zarrfuse`` argument parser and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="zarrfuse", description="Zarr v3 arrays as ordinary files, one file per chunk."
    )
    parser.add_argument("--version", action="version", version=f"zarrfuse {__version__}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    _add_mount(commands)
    p = commands.add_parser("umount", help="unmount a zarrfuse mount (lazily if dead or busy)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT", nargs="?")
    p.add_argument("--config", metavar="FILE", help="unmount the mountpoint this file names")
    p.add_argument(
        "--if-mounted", action="store_true",
        help="succeed quietly when nothing is mounted there (for systemd's ExecStopPost=)",
    )
    p.set_defaults(handler=_umount, usage=p)
    p = commands.add_parser(
        "stats", help="show a mount's counters (requests, bytes, store requests, errors)",
        description="Ask the daemon serving MOUNTPOINT for its counters, over its control "
        "socket (never through the mount itself).",
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("--json", action="store_true", help="print the daemon's JSON document")
    p.set_defaults(handler=_stats)
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
    p.add_argument("--debug", action="store_true", help="tracebacks for errors")
    p.set_defaults(handler=_verify)
    _add_tiff_commands(commands)
    p = commands.add_parser("demo", help="mount a built-in demo array and show it")
    p.add_argument(
        "dir", metavar="DIR", nargs="?", help="where to put the demo (default: a temp dir)"
    )
    p.set_defaults(handler=_demo)
    return parser


def _source(text: str) -> str:
    """A URL as given; a local path (or .zip file) made absolute, as the daemon runs in /."""
    if "://" in text:
        return text
    return os.path.abspath(os.path.expanduser(text))


def _split_options(groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(o.strip() for group in groups for o in group.split(",") if o.strip())


def _missing_paths(args: argparse.Namespace) -> str | None:
    """The usage error of a ``mount`` without SOURCE/MOUNTPOINT and without --config."""
    if args.config is None and args.mountpoint is None:
        return "SOURCE and MOUNTPOINT are required (or --config FILE)"
    return None


# MountConfig fields that ``zarrfuse mount`` flags set directly (None: not given).
_FLAG_FIELDS = (
    "suffix", "max_children", "read_only", "debug", "verify", "max_chunk_bytes", "scratch_mb",
    "uid", "gid", "umask", "format", "cache_mb", "metadata_ttl",
)


def mount_config(args: argparse.Namespace) -> MountConfig:
    """The MountConfig that ``zarrfuse mount`` arguments ask for.

    With ``--config FILE`` the file gives the starting values; every flag given on the command
    line overrides it (``-o`` and ``--storage-option`` add to it).
    """
    file = options.read_config_file(args.config) if args.config else options.ParsedOptions()
    values = dict(file.values)
    values.update({k: getattr(args, k) for k in _FLAG_FIELDS if getattr(args, k) is not None})
    if args.source is not None:
        values["source"] = args.source
    if args.mountpoint is not None:
        values["mountpoint"] = args.mountpoint
    if args.log_file:
        values["log_file"] = os.path.abspath(os.path.expanduser(args.log_file))
    for key in ("source", "mountpoint"):
        if not values.get(key):
            raise ConfigurationError(f"{args.config}: no {key} = ... line, and none given")
    values["source"] = _source(values["source"])
    values["mountpoint"] = os.path.abspath(os.path.expanduser(values["mountpoint"]))
    return MountConfig(
        **values,
        foreground=args.foreground,
        fuse_options=(*file.fuse_options, *_split_options(args.fuse_options)),
        storage_options={**file.storage_options, **dict(args.storage_options)},
    )


def _mount(args: argparse.Namespace) -> int:
    config = mount_config(args)
    if args.ready_fd is not None:
        return daemon.serve_as_daemon(config, args.ready_fd)
    if config.foreground:
        return daemon.serve_in_foreground(config)
    daemon.mount_in_background(config)
    return 0


def _umount(args: argparse.Namespace) -> int:
    if args.mountpoint is not None:
        path = os.path.abspath(args.mountpoint)
    else:
        path = options.read_config_file(args.config).values.get("mountpoint", "")
        if not path:
            raise ConfigurationError(f"{args.config}: no mountpoint = ... line")
    if args.if_mounted and not is_mounted(path):
        return 0
    if unmount_or_detach(path):
        _complain(f"{path} was dead, stuck or busy: detached it lazily")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from zarrfuse import control  # noqa: PLC0415  (keeps trio out of the other commands)

    document = control.request_stats(args.mountpoint)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(control.format_stats(document), end="")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from zarrfuse import integrity  # noqa: PLC0415  (pulls in zarr's codecs)

    return integrity.main(
        _source(args.source), storage_options=dict(args.storage_options) or None, jobs=args.jobs
    )


def _info(args: argparse.Namespace) -> int:
    from zarrfuse import info  # noqa: PLC0415

    text = info.describe(_source(args.source), storage_options=dict(args.storage_options) or None)
    print(text, end="")
    return 0


def _convert_tiff(args: argparse.Namespace) -> int:
    from zarrfuse import tiff_arrays  # noqa: PLC0415

    dest = _source(args.dest)
    array = tiff_arrays.convert_to_tiff_array(
        _source(args.source),
        dest,
        samples=args.samples,
        tile_shape=args.tile,
        shard_shape=args.shard_shape,
        compression=args.compression,
        bigtiff=args.bigtiff,
        header_part=args.header_part,
        overwrite=args.overwrite,
    )
    print(f"{dest}: shape {list(array.shape)}, {array.dtype}, shards {list(array.shards or ())}")
    return 0


def _repair_tiff(args: argparse.Namespace) -> int:
    from zarrfuse import tiff_arrays  # noqa: PLC0415

    found = tiff_arrays.repair_tiff_headers(_source(args.source), check_only=args.check)
    for line in found.unreadable:
        print(f"FAILED {line}", file=sys.stderr)
    done = "stale" if args.check else "rewritten"
    print(f"{args.source}: {found.checked} shards checked, {found.stale} TIFF headers {done}"
          + (f", {len(found.unreadable)} unreadable" if found.unreadable else ""))
    return 1 if found.unreadable or (args.check and found.stale) else 0


def _demo(args: argparse.Namespace) -> int:
    from zarrfuse import demo  # only this command needs it, and it pulls in the whole mount

    return demo.run(args.dir)


def _usage_error(args: argparse.Namespace) -> str | None:
    """What argparse cannot say: a command missing the operands its options did not give."""
    handler = getattr(args, "handler", None)
    if handler is _mount:
        return _missing_paths(args)
    if handler is _umount and (args.mountpoint is None) == (args.config is None):
        return "give MOUNTPOINT or --config FILE (one of them)"
    return None


def _is_mount_helper_call(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is mount.fuse3's ``zarrfuse SOURCE MOUNTPOINT -o OPTIONS``.

    ``mount -t fuse.zarrfuse`` runs ``/sbin/mount.fuse.zarrfuse`` if installed, else
    mount.fuse3, which runs ``zarrfuse SOURCE MOUNTPOINT -o OPTIONS`` from PATH (always with
    ``-o``: it adds ``dev,suid`` or ``nosuid,nodev``). The first word is then not a command.
    """
    commands = {"mount", "umount", "stats", "verify", "demo", "info", "convert-tiff", "repair-tiff"}
    return (
        len(argv) >= 3
        and argv[0] not in commands
        and not argv[0].startswith("-")
        and any(a.startswith("-o") for a in argv[2:])
    )


def _complain(message: str) -> None:
    print(f"zarrfuse: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zarrfuse`` command; its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if _is_mount_helper_call(argv):
        from zarrfuse import mount_helper  # noqa: PLC0415

        return mount_helper.main(argv, prog="zarrfuse")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        problem = _usage_error(args)
        if problem:
            args.usage.error(problem)
    except SystemExit as e:  # usage error (2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    handler: Handler = args.handler
    debug = getattr(args, "debug", False)
    try:
        return handler(args)
    except KeyboardInterrupt:
        _complain("interrupted")
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``zarrfuse stats | head``): not an error to
        # report. Point stdout at /dev/null so Python's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command killed by it
    except Exception as e:
        if debug:
            traceback.print_exc()
        message = daemon.error_message(e)
        if not isinstance(e, ZarrFuseError | OSError):  # a bug, or an error nobody translated
            message += "" if debug else " (--debug shows the traceback)"
        _complain(message)
        return 1
