"""The command line and operations: commands, mount options and the mount helper, the
background daemon, the stats socket, sd_notify, ``verify``, ``info`` and the demo."""

from zarrfuse.cli.commands import main

__all__ = ["main"]
