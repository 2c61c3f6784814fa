"""The benchmark harness (``python -m bench``): one table, verdicts against floors and
bounds, the doc's section rewritten. Runs one scenario in ``--quick`` mode that mounts
nothing (``tiff-shards``); no figure is asserted, only what the table says about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import BEGIN, END, main
from bench.harness import Row, at_least, at_most


@pytest.mark.parametrize(("value", "bound", "verdict"), [
    ([1.0], [5.0], "yes"),  # 1.0 / 2.0 = 0.5x, within 1.5x
    ([4.0], [2.0], "no (bound meets it)"),  # 2.0x; the bound 1.0x: zarrfuse's own cost
    ([4.0], [3.2], "no; out of reach"),  # 2.0x, and the bound 1.6x misses too
    ([], [2.0], "n/a"),  # the figure failed in every round
])
def test_a_missed_floor_says_whether_its_bound_meets_it(value, bound, verdict):
    row = Row("m", "s", value, ("base", [2.0, 2.0, 1.0]), ("bound", bound), at_most(1.5))
    assert row.holds() == verdict


def test_absolute_floors_and_paces_read_the_figure_the_right_way():
    assert Row("paint", "s", [0.3, 0.2, 0.1], floor=at_most(0.25, absolute=True)).holds() == "yes"
    assert Row("paint", "s", [0.3, 0.3], floor=at_most(0.25, absolute=True)).holds() == "no"
    pace = Row("cp", "MB/s", [90.0], ("bindfs", [100.0]), floor=at_least(0.9))
    assert pace.holds() == "yes" and pace.cells()[5] == "0.90x"


def test_one_quick_run_prints_one_table_and_rewrites_the_docs_section(tmp_path, capsys):
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n")
    assert main(["run", "tiff-shards", "--quick", "--workdir", str(tmp_path),
                 "--doc", str(doc)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| tiff-shards |")]
    assert len(rows) == 2, out
    convert = next(r for r in rows if "convert to dual-access" in r).split(" | ")
    assert convert[1] == "6" and convert[4].endswith("zarr.from_array, same shards")
    assert convert[5].endswith("x") and convert[8] == ">= 0.5x"
    assert convert[9].rstrip(" |") in ("yes", "no")
    assert "quick" in out
    text = doc.read_text()
    assert "old table" not in text and "| tiff-shards | 6 | convert to dual-access" in text
    assert text.startswith("# Performance\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert list(Path(tmp_path).glob("zarrfuse-bench-*")) == []  # its scratch removed


def test_an_unknown_scenario_is_refused():
    with pytest.raises(SystemExit):
        main(["run", "no-such-scenario"])
