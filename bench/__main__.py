"""``python -m bench run [NAMES...] [--quick] [--doc docs/performance.md]``: the chosen
scenarios (all by default), one table. ``python -m bench list`` names them."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from bench.harness import Context, Row, log, table
from bench.scenarios import SCENARIOS

BEGIN, END = "<!-- bench: begin -->", "<!-- bench: end -->"


def load(name: str) -> ModuleType:
    return importlib.import_module(f"bench.scenarios.{SCENARIOS[name][0]}")


def revision() -> str:
    """The commit measured, ``+dirty`` if ``zarrfuse/`` differs from it (the mounts run the
    working tree)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--", "zarrfuse"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError) as e:
        return f"unknown ({e})"
    return head + ("+dirty" if dirty else "")


def heading(args: argparse.Namespace, took: float) -> str:
    mode = "quick (small sizes: a smoke run, not figures)" if args.quick else "full sizes"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M %z')}, zarrfuse {revision()}, {mode}, medians of "
            f"{args.rounds} interleaved round(s); kernel {os.uname().release}, "
            f"{len(os.sched_getaffinity(0))} CPUs, load average at the end {load}; "
            f"the run took {took:.0f} s")


def rewrite(doc: Path, text: str) -> None:
    """Put ``text`` between the doc's markers, which must be there (once each)."""
    old = doc.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if len(pattern.findall(old)) != 1:
        raise SystemExit(f"{doc}: needs one {BEGIN} ... {END} section")
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", old))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="name every scenario and what it measures")
    r = sub.add_parser("run", help="run scenarios and print one table")
    r.add_argument("names", nargs="*", metavar="NAME", help="scenarios (default: all)")
    r.add_argument("--quick", action="store_true", help="small sizes, 1 round: a smoke run")
    r.add_argument("--rounds", type=int, help="interleaved rounds (3; --quick: 1)")
    r.add_argument("--phase-timeout", type=float, default=300.0,
                   help="seconds before the watchdog aborts the FUSE connections (300)")
    r.add_argument("--workdir", type=Path, help="scratch directory's parent (default: /tmp)")
    r.add_argument("--doc", type=Path, help="also write the table into this Markdown file, "
                   f"between {BEGIN} and {END}")
    args = p.parse_args(argv)
    if args.command == "list":
        for name in SCENARIOS:
            summary = (load(name).__doc__ or "").strip().split("\n\n")[0]
            print(f"{name:<16} {' '.join(summary.split())}")
        return 0
    unknown = [n for n in args.names if n not in SCENARIOS]
    if unknown:
        p.error(f"no scenario {', '.join(unknown)}; python -m bench list names them")
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.workdir is not None:  # a parent named but not there yet: made, as mkdir -p
        args.workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: list[Row] = []
    failures: list[str] = []
    for name in args.names or list(SCENARIOS):
        module = load(name)
        work = Path(tempfile.mkdtemp(prefix=f"zarrfuse-bench-{name}-", dir=args.workdir))
        ctx = Context(work, args.quick, args.rounds, args.phase_timeout)
        log(f"{name}: {' '.join((module.__doc__ or '').split('.')[0].split())}")
        try:
            with ctx.stack:
                got = module.measure(ctx, **SCENARIOS[name][1])
            for row in got:
                row.scenario, row.issue = name, row.issue or module.ISSUE
            rows += got
        # one scenario's crash is reported; the others still run
        except Exception as e:  # noqa: BLE001  (see above)
            log(f"!! {name}: {type(e).__name__}: {e}")
            failures.append(f"{name}: {type(e).__name__}: {e}")
        finally:
            ctx.watchdog.disarm()
            shutil.rmtree(work, ignore_errors=True)
        failures += [f"{name}: {f}" for f in ctx.failures]
    text = heading(args, time.perf_counter() - started) + "\n\n" + table(rows)
    if failures:
        text += "\n\nFailed: " + "; ".join(failures)
    print(text)
    if args.doc:
        rewrite(args.doc, text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
