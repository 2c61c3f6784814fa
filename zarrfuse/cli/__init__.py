"""The command line and operations: commands, mount options and the mount helper, the
background daemon, the stats socket, sd_notify, ``verify``, ``info`` and the demo."""

from typing import NoReturn

from zarrfuse.cli.commands import main
from zarrfuse.cli.process_exit import run_and_leave

__all__ = ["main", "run"]


def run() -> NoReturn:
    """The ``zarrfuse`` program: ``main`` on ``sys.argv``, then the process ends
    (``process_exit``: no interpreter finalisation racing native threads)."""
    run_and_leave(main)
