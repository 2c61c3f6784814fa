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
import warnings
from collections.abc import Sequence

from zarrfuse.cli import daemon, extras, options, parser
from zarrfuse.cli.option_table import MOUNT_OPTIONS
from zarrfuse.cli.parser import Handler
from zarrfuse.cli.ready_pipe import print_note
from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.fuse.config import READ_ONLY_SCHEMES, MountConfig
from zarrfuse.fuse.mountpoint import is_mounted, unmount_or_detach

__all__ = ["build_parser", "main", "mount_config"]


def mount_config(args: argparse.Namespace) -> MountConfig:
    """The MountConfig that ``zarrfuse mount`` arguments ask for.

    With ``--config FILE`` the file gives the starting values; every flag given on the command
    line overrides it (``-o`` and ``--storage-option`` add to it).
    """
    file = options.read_config_file(args.config) if args.config else options.ParsedOptions()
    # -o words are zarrfuse's own (fstab spelling: storage_option.KEY=VALUE, read_only...)
    # or FUSE's; zarrfuse's never reach libfuse, which would echo them, secrets included.
    words = options.parse_options(
        o.strip() for group in args.fuse_options for o in group.split(",") if o.strip())
    values = {**file.values, **words.values}
    flags = (*(option.field for option in MOUNT_OPTIONS), "source", "mountpoint")
    values.update({k: getattr(args, k) for k in flags if getattr(args, k) is not None})
    if args.log_file:
        values["log_file"] = os.path.abspath(os.path.expanduser(args.log_file))
    for key in ("source", "mountpoint"):
        if not values.get(key):
            raise ConfigurationError(f"{args.config}: no {key} = ... line, and none given")
    values["source"] = options.absolute_source(values["source"])
    values["mountpoint"] = os.path.abspath(os.path.expanduser(values["mountpoint"]))
    config = MountConfig(
        **values,
        foreground=args.foreground,
        fuse_options=(*file.fuse_options, *words.fuse_options),
        storage_options={**file.storage_options, **words.storage_options,
                         **dict(args.storage_options)},
    )
    if (config.read_only and not values.get("read_only")
            and not config.source.startswith(READ_ONLY_SCHEMES)):  # the view made it so
        print(f"zarrfuse: mounting read-only: the --format {config.format} view takes no "
              "writes (--read-only says this is meant)", file=sys.stderr)
    return config


def _mount(args: argparse.Namespace) -> int:
    spawned = args.config_fd is not None  # the daemon: its configuration comes through a pipe
    config = daemon.read_config(args.config_fd) if spawned else mount_config(args)
    if args.ready_fd is not None:
        return daemon.serve_as_daemon(config, args.ready_fd)
    if config.foreground or spawned:
        return daemon.serve_in_foreground(config)
    daemon.mount_in_background(config)
    return 0


def _umount(args: argparse.Namespace) -> int:
    if args.all:
        from zarrfuse.cli.desktop import user_mounts  # noqa: PLC0415  (only this option)

        paths = user_mounts()
    elif args.mountpoint is not None:
        paths = [os.path.abspath(args.mountpoint)]
    else:
        paths = [options.read_config_file(args.config).values.get("mountpoint", "")]
        if not paths[0]:
            raise ConfigurationError(f"{args.config}: no mountpoint = ... line")
    if args.if_mounted and not args.all:
        paths = [path for path in paths if is_mounted(path)]
    for path in paths:
        if why := unmount_or_detach(path):
            print_note(f"{path} was {why}: detached it lazily")
    return 0


def _log(args: argparse.Namespace) -> int:
    """``zarrfuse log MOUNTPOINT``: the daemon's last log lines, and where the rest are."""
    from zarrfuse.daemon import control  # noqa: PLC0415  (keeps trio out of the other commands)

    document = control.request_stats(args.mountpoint)
    lines = document.get("log") or []
    for line in lines[-args.lines :] if args.lines else lines:
        print(line)
    print(f"zarrfuse: the whole log: {document.get('log_to', 'unknown')}", file=sys.stderr)
    return 0


def _stats(args: argparse.Namespace) -> int:
    from zarrfuse.daemon import control  # noqa: PLC0415  (keeps trio out of the other commands)

    document = control.request_stats(args.mountpoint)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(control.format_stats(document), end="")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from zarrfuse import integrity  # noqa: PLC0415  (pulls in zarr's codecs)

    return integrity.main(
        options.absolute_source(args.source),
        storage_options=dict(args.storage_options) or None,
        jobs=args.jobs,
        repair_commits=args.repair,
    )


def _info(args: argparse.Namespace) -> int:
    from zarrfuse.cli import info  # noqa: PLC0415  (pulls in zarr and the TIFF code)

    source = options.absolute_source(args.source)
    storage = dict(args.storage_options) or None
    if args.json:
        print(json.dumps(info.describe_json(source, storage_options=storage), indent=2))
    else:
        print(info.describe(source, storage_options=storage), end="")
    return 0


def _convert_tiff(args: argparse.Namespace) -> int:
    from zarrfuse.tiff import arrays as tiff_arrays  # noqa: PLC0415  (tifffile, imagecodecs)

    dest = options.absolute_source(args.dest)
    array = tiff_arrays.convert_to_tiff_array(
        options.absolute_source(args.source),
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
    from zarrfuse.tiff import arrays as tiff_arrays  # noqa: PLC0415  (tifffile, imagecodecs)

    found = tiff_arrays.repair_tiff_headers(
        options.absolute_source(args.source), check_only=args.check
    )
    for line in found.unreadable:
        print(f"FAILED {line}", file=sys.stderr)
    done = "stale" if args.check else "rewritten"
    print(f"{args.source}: {found.checked} shards checked, {found.stale} TIFF headers {done}"
          + (f", {len(found.unreadable)} unreadable" if found.unreadable else ""))
    return 1 if found.unreadable or (args.check and found.stale) else 0


def _desktop(args: argparse.Namespace) -> int:
    from zarrfuse.cli import desktop  # noqa: PLC0415  (only this command)

    if args.action in ("install", "uninstall"):
        done = desktop.install() if args.action == "install" else desktop.uninstall()
        for line in done or ["nothing to remove"]:
            print(line)
        return 0
    if args.folder is None:
        raise ConfigurationError("desktop open needs the FOLDER to mount")
    desktop.mount_folder(args.folder, open_it=not args.no_open, fmt=args.format)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from zarrfuse.cli import demo  # noqa: PLC0415  (only this command needs it; loads the mount)

    hold = sys.stdin.isatty() if args.hold is None else args.hold  # a person is there to look
    return demo.run(args.dir, hold=hold)


HANDLERS: dict[str, Handler] = {
    "mount": _mount,
    "umount": _umount,
    "stats": _stats,
    "log": _log,
    "verify": _verify,
    "info": _info,
    "convert-tiff": _convert_tiff,
    "repair-tiff": _repair_tiff,
    "demo": _demo,
    "desktop": _desktop,
}


# The commands that mount or talk to a mount: without the mount extra they stop before
# anything else, saying what to install (the mount(8) helper path checks in mount_helper).
NEEDS_MOUNT_EXTRA: tuple[Handler, ...] = (_mount, _stats, _log, _demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``zarrfuse`` argument parser, each command bound to its handler here."""
    return parser.build_parser(HANDLERS)


def _usage_error(args: argparse.Namespace) -> str | None:
    """What argparse cannot say: a command missing the operands its options did not give."""
    handler = getattr(args, "handler", None)
    if handler is _mount and args.config is None and args.mountpoint is None:
        return "SOURCE and MOUNTPOINT are required (or --config FILE)"
    if handler is _umount and not args.all and (args.mountpoint is None) == (args.config is None):
        return "give MOUNTPOINT, --config FILE or --all (one of them)"
    return None


def _is_mount_helper_call(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is mount.fuse3's ``zarrfuse SOURCE MOUNTPOINT -o OPTIONS`` (see
    ``mount_helper``; always with ``-o``: it adds ``dev,suid`` or ``nosuid,nodev``)."""
    return (
        len(argv) >= 3
        and argv[0] not in HANDLERS
        and not argv[0].startswith("-")
        and any(a.startswith("-o") for a in argv[2:])
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zarrfuse`` command; its exit status."""
    # zarr warns whenever it opens an array with a ``numcodecs.*`` codec; dual-access arrays
    # use numcodecs.zlib by default, a choice the user already made (docs/dual-access.md), so
    # the command does not repeat it on every info, verify or mount.
    warnings.filterwarnings(
        "ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")
    argv = list(sys.argv[1:] if argv is None else argv)
    if _is_mount_helper_call(argv):
        from zarrfuse.cli import mount_helper  # noqa: PLC0415  (only fstab's calls need it)

        return mount_helper.main(argv, prog="zarrfuse")
    arguments = build_parser()
    try:
        args = arguments.parse_args(argv)
        problem = _usage_error(args)
        if problem:
            args.usage.error(problem)
    except SystemExit as e:  # usage error (2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    handler: Handler = args.handler
    missing = extras.missing_mount_extra() if handler in NEEDS_MOUNT_EXTRA else None
    if missing:
        print_note(missing)
        return 1
    debug = getattr(args, "debug", False)
    try:
        return handler(args)
    except KeyboardInterrupt:
        print_note("interrupted")
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``zarrfuse stats | head``): not an error to
        # report. Point stdout at /dev/null so Python's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command killed by it
    except Exception as e:  # noqa: BLE001  (every failure becomes the one-line error)
        if debug:
            traceback.print_exc()
        message = daemon.error_message(e)
        if not isinstance(e, ZarrFuseError | OSError):  # a bug, or an error nobody translated
            message += "" if debug else " (--debug shows the traceback)"
        print_note(message)
        return 1
