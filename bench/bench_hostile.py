"""Issue 34's hostile-store catalogue at full size, with its counts beside the floor.

Every case of ``tests/hostile.py`` (special files at chunk keys and metadata documents,
symlinks out of the store and in loops, decompression bombs of 1 GiB in every streaming
codec, oversized, malformed and absurd documents) is mounted read-only in the raw view and
in ``--format tiff``, and ``find``/``cat`` read every file. The floor: no hang, no escape,
the healthy sibling array exact, the daemon under 400 MiB; a special file or a bomb answers
EIO where it is read.

    .venv/bin/python bench/bench_hostile.py                 # 1 GiB bombs
    .venv/bin/python bench/bench_hostile.py --bomb-mib 256  # quicker
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.hostile import CASES, build_case, probe  # noqa: E402  (after the sys.path insert)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bomb-mib", type=int, default=1024)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zarrfuse-hostile-"))
    print(f"{'case':<22} {'view':<5} {'mounted':>7} {'hang':>5} {'escape':>6} {'EIO':>4} "
          f"{'files':>6} {'ok':>4} {'walk':>5} {'RSS MiB':>8}")
    bad = hangs = escapes = 0
    try:
        for name in CASES:
            group, _ = build_case(work / name, name, args.bomb_mib << 20)
            for view in ("raw", "tiff"):
                r = probe(group, work / name / f"mnt-{view}", view)
                print(f"{name:<22} {view:<5} {r.mounted!s:>7} {r.hang!s:>5} {r.escape!s:>6} "
                      f"{r.eio:>4} {r.files:>6} {r.ok_exact!s:>4} {r.walk_ended!s:>5} "
                      f"{r.rss_peak_mib:>8.0f}", flush=True)
                bad += r.bad
                hangs += r.hang
                escapes += r.escape
            shutil.rmtree(work / name, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(CASES) * 2} mounts: {hangs} hangs, {escapes} escapes, {bad} failing the floor")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
