"""Which names are scratch (temporary) files: the rule docs/writing.md's "Scratch files" states."""

from __future__ import annotations

import pytest

from zarrfuse.filesystem.writes.scratch import is_scratch_name, is_vim_probe


@pytest.mark.parametrize("name", [".000.XXXXXX", ".goutputstream-AB12CD", "#000#", ".#000",
                                  "000~", "000.tmp", ".000.swp", "x.part", "x.bak"])
def test_temp_shaped_names_are_scratch_however_created(name):
    assert is_scratch_name(name) and is_scratch_name(name, exclusive=True)


@pytest.mark.parametrize("name", ["sedp3B4jg", "tmpk2_9zq0a", "tmpk2_9zq0a.tiff", "XXY2640t"])
def test_mkstemp_template_names_are_scratch_only_when_created_exclusively(name):
    assert is_scratch_name(name, exclusive=True)
    assert not is_scratch_name(name)


@pytest.mark.parametrize("name", ["notes.txt", "sedfile", "tmp1", "abcdefghi", "4913",
                                  "12345678", "000", "chunk.tiff"])
def test_other_names_are_never_scratch(name):
    assert not is_scratch_name(name, exclusive=True)


def test_vim_probe_names():
    assert [n for n in range(4900, 5300) if is_vim_probe(str(n))] == [4913, 5036, 5159, 5282]
    assert not is_vim_probe("04913") and not is_vim_probe("4913~")
