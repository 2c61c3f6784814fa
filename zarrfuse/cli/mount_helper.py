"""``mount.fuse.zarrfuse``: what mount(8) runs for ``mount -t fuse.zarrfuse`` and fstab lines.

How a ``fuse.zarrfuse`` mount reaches zarrfuse on Debian 12 (util-linux 2.38, fuse3 3.14),
checked by running both:

- mount(8) looks for ``/sbin/mount.fuse.zarrfuse`` first and runs
  ``mount.fuse.zarrfuse SOURCE MOUNTPOINT [-v] -o OPTIONS``. It has already dropped
  ``defaults``, ``noauto`` and ``x-systemd.*``, decoded fstab's ``\\040`` escapes, and turned
  ``user`` into ``user,noexec,nosuid,nodev``; ``nofail`` and ``_netdev`` are passed on.
- Without that helper it runs ``/sbin/mount.fuse`` (= ``mount.fuse3``), which runs
  ``zarrfuse SOURCE MOUNTPOINT -o OPTIONS`` through ``/bin/sh`` from ``PATH``, after dropping
  ``nofail``, ``_netdev``, ``user`` and adding ``dev,suid`` (as root). ``zarrfuse`` recognises
  that form (a first word that is not a command, and ``-o``) and lands here too.

Either way the options are the :mod:`zarrfuse.cli.options` vocabulary, and the mount is made as
``zarrfuse mount`` makes it: checked first, then a daemon in the background, and this command
returns only once the mount is live (or exits non-zero saying why, leaving nothing mounted).

Exit status follows mount(8): 0 mounted, 1 bad invocation, 32 the mount failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from zarrfuse.cli import daemon, extras, options
from zarrfuse.cli.process_exit import run_and_leave
from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.fuse.config import MountConfig

__all__ = ["main", "parse"]

EXIT_USAGE = 1
EXIT_FAILURE = 32


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="mount(8) helper for -t fuse.zarrfuse: mount SOURCE at MOUNTPOINT with "
        "-o options (ro, suffix=.tiff, max_children=N, uid=, gid=, umask=, allow_other, "
        "storage_option.KEY=VALUE, log_file=, debug, ...).",
    )
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("-o", dest="options", action="append", default=[], metavar="OPTIONS")
    p.add_argument("-t", dest="type", metavar="TYPE", help="fuse.zarrfuse (ignored)")
    p.add_argument("-f", dest="fake", action="store_true", help="do everything but mount")
    p.add_argument("-n", dest="no_mtab", action="store_true", help="(ignored: no mtab)")
    p.add_argument("-s", dest="sloppy", action="store_true", help="(ignored)")
    p.add_argument("-v", dest="verbose", action="store_true", help="say what is mounted")
    p.add_argument("-N", dest="namespace", metavar="NS", help="(not supported)")
    return p


def parse(
    argv: Sequence[str], prog: str = "mount.fuse.zarrfuse"
) -> tuple[MountConfig, argparse.Namespace]:
    """The helper's arguments as ``(MountConfig, namespace)``; raises ConfigurationError."""
    args = _parser(prog).parse_intermixed_args(list(argv))
    if args.namespace is not None:
        raise ConfigurationError("-N (mounting in another namespace) is not supported")
    words = [w for group in args.options for w in options.split_option_list(group)]
    parsed = options.parse_options(words)
    config = options.config_from(
        parsed,
        source=options.absolute_source(args.source),
        mountpoint=os.path.abspath(os.path.expanduser(args.mountpoint)),
    )
    return config, args


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the helper; mount(8)'s exit status."""
    prog = prog or os.path.basename(sys.argv[0]) or "mount.fuse.zarrfuse"
    try:
        config, args = parse(sys.argv[1:] if argv is None else argv, prog)
    except SystemExit as e:  # argparse: usage error or --help
        return 0 if e.code == 0 else EXIT_USAGE
    except ZarrFuseError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_USAGE
    missing = extras.missing_mount_extra()
    if missing:
        print(f"{prog}: {missing}", file=sys.stderr)
        return EXIT_USAGE
    if args.verbose:
        print(f"{prog}: mounting {config.source} at {config.mountpoint}", file=sys.stderr)
    if args.fake:
        return 0
    try:
        daemon.mount_in_background(config)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:  # noqa: BLE001  (every failure becomes mount(8)'s one line)
        if config.debug:
            traceback.print_exc()
        print(f"{prog}: {daemon.error_message(e)}", file=sys.stderr)
        return EXIT_FAILURE
    return 0


def run() -> NoReturn:
    """The ``mount.fuse.zarrfuse`` program: ``main``, then the process ends (``process_exit``)."""
    run_and_leave(main)


if __name__ == "__main__":
    run()
