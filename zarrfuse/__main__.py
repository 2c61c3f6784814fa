"""``python -m zarrfuse``: the ``zarrfuse`` command; the background daemon is started this way."""

from zarrfuse.cli import run

if __name__ == "__main__":
    run()
