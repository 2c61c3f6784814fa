"""Issue 34's hostile-store catalogue at full size (``tests/hostile.py``, which the torture
tier runs with 64 MiB bombs): every case (special files at chunk keys and documents, links
out of the store and in loops, decompression bombs of 1 GiB in every streaming codec,
oversized, malformed and absurd documents; ``--quick``: the first 4 cases, 64 MiB bombs)
mounted read-only raw and as TIFF and walked with ``find``/``cat``. Floor: no hang, no
escape, the healthy sibling array exact, the daemon under 400 MiB, in every mount."""

from __future__ import annotations

import shutil

from bench.harness import Context, Row, at_most

ISSUE = "34"


def measure(ctx: Context) -> list[Row]:
    from tests.hostile import CASES, build_case, probe  # noqa: PLC0415  (the test tier's)

    cases, bomb = ctx.pick(list(CASES), list(CASES)[:4]), ctx.pick(1024, 64) << 20
    hangs = escapes = lost = eio = 0
    peak = 0.0
    for name in cases:
        group, _ = build_case(ctx.work / name, name, bomb)
        for view in ("raw", "tiff"):
            r = probe(group, ctx.work / name / f"mnt-{view}", view)
            hangs, escapes, lost = hangs + r.hang, escapes + r.escape, lost + (not r.ok_exact)
            eio, peak = eio + r.eio, max(peak, r.rss_peak_mib)
        shutil.rmtree(ctx.work / name, ignore_errors=True)
    label = f"{len(cases)} hostile stores, {2 * len(cases)} mounts"
    return [Row(f"{label}: hangs", "", [hangs], floor=at_most(0, True)),
            Row(f"{label}: escapes", "", [escapes], floor=at_most(0, True)),
            Row(f"{label}: healthy arrays not read exact", "", [lost], floor=at_most(0, True)),
            Row(f"{label}: the daemon's RSS peak", "MiB", [peak], floor=at_most(400, True)),
            Row(f"{label}: EIO answers", "", [eio])]
