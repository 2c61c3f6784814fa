"""``python -m zarrfuse``: the ``zarrfuse`` command; the background daemon is started this way."""

import sys

from zarrfuse.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
