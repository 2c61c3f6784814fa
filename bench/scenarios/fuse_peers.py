"""The local contenders of issue 35's rows: bindfs (a C passthrough, the baseline), the
pyfuse3 ceiling (``bench/passthrough_pyfuse3.py``: ``pread`` in the trio thread and nothing
else), the same answering every FLUSH (the bound of a writable mount, which must see each
close), and zarrfuse's raw and TIFF views, ``--read-only`` and default. Not a scenario."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bench.harness import HERE, Context, Mount


@dataclass(frozen=True)
class Peer:
    name: str
    kind: str  # "bindfs", "ceiling" or "zarrfuse"
    options: tuple[str, ...] = ()
    suffix: str = ""  # of the chunk files in a zarrfuse view

    @property
    def writable(self) -> bool:
        return self.kind == "zarrfuse" and "--read-only" not in self.options

    def mount(self, ctx: Context, store: Path, where: Path) -> Mount:
        if self.kind == "bindfs":
            return ctx.foreground(["bindfs", "-f", "--no-allow-other", store, where], where)
        if self.kind == "ceiling":
            return ctx.foreground([sys.executable, HERE / "passthrough_pyfuse3.py",
                                   *self.options, store, where], where)
        return ctx.mount(store, where, *self.options)


BINDFS = Peer("bindfs", "bindfs")
CEILING = Peer("ceiling", "ceiling")
FLUSHED = Peer("ceiling answering FLUSH", "ceiling", ("--flush",))
RAW_RO = Peer("raw --read-only", "zarrfuse", ("--read-only",))
RAW = Peer("raw default", "zarrfuse")
TIFF_RO = Peer("tiff --read-only", "zarrfuse", ("--format", "tiff", "--read-only"), ".tiff")
TIFF = Peer("tiff default", "zarrfuse", ("--format", "tiff"), ".tiff")
ZARRFUSE = (RAW_RO, RAW, TIFF_RO, TIFF)


def bound_of(peer: Peer) -> Peer:
    """What costs a FUSE daemon nothing more than ``peer`` must do."""
    return FLUSHED if peer.writable else CEILING
