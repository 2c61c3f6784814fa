"""The ``zarrfuse`` command: parse arguments into a frozen MountConfig and dispatch.

Nothing happens here beyond parsing and dispatch: mounting lives in ``daemon`` and ``mount``,
mountpoint handling in ``mountpoint``. Errors become one line on stderr, ``zarrfuse:
<message>``, and exit status 1 (usage errors: 2). Expected ones (every ZarrFuseError, and
OSError from bad paths) show just their message; anything else, a bug or a library error
nobody translated, also its type. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from zarrfuse import __version__, daemon
from zarrfuse.config import MountConfig
from zarrfuse.errors import ZarrFuseError
from zarrfuse.mountpoint import unmount_or_detach

__all__ = ["build_parser", "main", "mount_config"]

Handler = Callable[[argparse.Namespace], int]


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


def _ready_fd(text: str) -> int:
    value = int(text)
    if value < 3:
        raise ValueError(text)
    return value


def _add_mount(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "mount",
        help="mount a Zarr v3 array or group",
        description="Mount SOURCE (a path, file:// URL, .zip store or any URL zarr-python "
        "opens, e.g. s3://bucket/array) at MOUNTPOINT. Returns once the mount is live, "
        "unless --foreground.",
    )
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("--suffix", metavar="S", help="file suffix of chunk files (default: derived)")
    p.add_argument(
        "--max-children", metavar="N", type=_positive_int,
        help="fanout: at most N entries per directory (default: derived)",
    )
    p.add_argument("--read-only", action="store_true", help="refuse all writes")
    p.add_argument(
        "--foreground", action="store_true", help="serve in this process until unmounted"
    )
    p.add_argument(
        "-o", dest="fuse_options", metavar="OPTS", action="append", default=[],
        help="comma-separated FUSE options (allow_other, ...); repeatable",
    )
    p.add_argument("--debug", action="store_true", help="debug logging and tracebacks")
    p.add_argument("--log-file", metavar="PATH", help="log here instead of stderr")
    p.add_argument(
        "--storage-option", dest="storage_options", metavar="KEY=VALUE", type=_storage_option,
        action="append", default=[], help="passed to the store (fsspec); repeatable",
    )
    p.add_argument(
        "--verify", action="store_true",
        help="decode every written chunk with the array's codecs; refuse what fails",
    )
    p.add_argument(
        "--max-chunk-bytes", metavar="N", type=_positive_int,
        help="largest chunk file a write may make (default: derived from the chunk)",
    )
    p.add_argument(
        "--scratch-mb", metavar="N", type=_non_negative_int, default=MountConfig.scratch_mb,
        help="memory for temporary files (rsync's, editors'); 0 refuses them "
        "(default: %(default)s)",
    )
    # Set only by the background parent on the daemon it spawns: report readiness here.
    p.add_argument("--ready-fd", type=_ready_fd, help=argparse.SUPPRESS)
    p.set_defaults(handler=_mount)


def build_parser() -> argparse.ArgumentParser:
    """The ``zarrfuse`` argument parser and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="zarrfuse", description="Zarr v3 arrays as ordinary files, one file per chunk."
    )
    parser.add_argument("--version", action="version", version=f"zarrfuse {__version__}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    _add_mount(commands)
    p = commands.add_parser("umount", help="unmount a zarrfuse mount (lazily if dead or busy)")
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.set_defaults(handler=_umount)
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


def mount_config(args: argparse.Namespace) -> MountConfig:
    """The MountConfig that ``zarrfuse mount`` arguments ask for."""
    return MountConfig(
        source=_source(args.source),
        mountpoint=os.path.abspath(os.path.expanduser(args.mountpoint)),
        suffix=args.suffix,
        max_children=args.max_children,
        read_only=args.read_only,
        foreground=args.foreground,
        fuse_options=_split_options(args.fuse_options),
        debug=args.debug,
        log_file=os.path.abspath(os.path.expanduser(args.log_file)) if args.log_file else None,
        storage_options=dict(args.storage_options),
        verify=args.verify,
        max_chunk_bytes=args.max_chunk_bytes,
        scratch_mb=args.scratch_mb,
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
    path = os.path.abspath(args.mountpoint)
    if unmount_or_detach(path):
        _complain(f"{path} was dead, stuck or busy: detached it lazily")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from zarrfuse import demo  # only this command needs it, and it pulls in the whole mount

    return demo.run(args.dir)


def _complain(message: str) -> None:
    print(f"zarrfuse: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zarrfuse`` command; its exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # usage error (2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    handler: Handler = args.handler
    debug = getattr(args, "debug", False)
    try:
        return handler(args)
    except KeyboardInterrupt:
        _complain("interrupted")
        return 130
    except Exception as e:
        if debug:
            traceback.print_exc()
        message = daemon.error_message(e)
        if not isinstance(e, ZarrFuseError | OSError):  # a bug, or an error nobody translated
            message += "" if debug else " (--debug shows the traceback)"
        _complain(message)
        return 1
