"""Errors that say what to fix (issue 33, point 2): a mistyped option (``--`` or ``-o``)
names the nearest one, libfuse's and fusermount3's own words reach the user with the fix
(the refusals that need another user or a dropped capability are in test_permissions.py),
and mounting over a folder with entries in it says so in one line (``--nonempty`` or
``-o nonempty`` says it is meant)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, force_unmount, run_with_timeout
from zarrfuse.cli import commands as cli
from zarrfuse.cli import options
from zarrfuse.errors import ConfigurationError
from zarrfuse.fuse.mount_refusal import explain


@pytest.mark.parametrize("typo, meant", [
    ("--readonly", "--read-only"), ("--no-verfy", "--no-verify"),
    ("--metadata-tll=5", "--metadata-ttl"), ("--format-tiff", "--format"),
])
def test_an_unknown_option_names_the_nearest(typo, meant, capsys):
    assert cli.main(["mount", "/s", "/m", typo]) == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {typo}; did you mean {meant}?" in err, err


def test_nothing_near_is_named_as_near(capsys):
    assert cli.main(["mount", "/s", "/m", "--zzzzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_nonempty_is_a_flag_and_an_o_word():
    parse = cli.build_parser().parse_args
    assert cli.mount_config(parse(["mount", "/s", "/m", "--nonempty"])).nonempty
    assert not cli.mount_config(parse(["mount", "/s", "/m"])).nonempty
    assert options.parse_options(["nonempty"]).values == {"nonempty": True}


@pytest.mark.parametrize("flag", [[], ["--nonempty"], ["-o", "nonempty"]])
def test_mounting_over_a_folder_with_entries_says_so_once(tmp_path, flag):
    zarr.create_array(tmp_path / "a", data=np.arange(16, dtype="u1"), chunks=(8,))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "notes.txt").write_text("mine")
    (mnt / "old").mkdir()
    result = run_with_timeout([*ZARRFUSE, "mount", tmp_path / "a", mnt, "--read-only", *flag],
                              check=False)
    try:
        assert result.returncode == 0, result.stderr
        lines = result.stderr.strip().splitlines()
        if flag:
            assert lines == [], result.stderr
        else:
            assert lines == [f"zarrfuse: warning: {mnt} is not empty: its 2 entries are "
                             "hidden while it is mounted (--nonempty, or -o nonempty, says "
                             "this is meant)"]
        assert "notes.txt" not in [p.name for p in mnt.iterdir()]  # hidden, as said
    finally:
        force_unmount(mnt)
    assert (mnt / "notes.txt").read_text() == "mine"  # and back after unmount


@pytest.mark.parametrize("typo, meant", [("readonly", "read_only"),
                                         ("metadata-tll=5", "metadata_ttl"),
                                         ("max_childrens=10", "max_children")])
def test_an_o_word_near_one_of_ours_names_it(typo, meant):
    with pytest.raises(ConfigurationError, match=f"did you mean {meant}\\?$"):
        options.parse_options([typo])


def test_libfuse_words_pass_on_even_when_near_ours():
    words = ["allow_other", "entry_timeout=5", "attr_timeout=5", "suid", "noatime", "fsname=x"]
    assert options.parse_options(words).fuse_options == words


@pytest.mark.parametrize("said, privileged, fix", [
    ("fusermount3: option allow_other only allowed if 'user_allow_other' is set in "
     "/etc/fuse.conf", False, "add the line user_allow_other to /etc/fuse.conf"),
    ("fusermount3: mount failed: Operation not permitted", True, "--cap-add SYS_ADMIN"),
    ("fuse: failed to exec fusermount3: No such file or directory", False, "install fuse3"),
    ("fuse: unknown option(s): `-o zzz'", False, "neither libfuse nor zarrfuse knows"),
])
def test_libfuses_own_words_come_with_the_fix(said, privileged, fix):
    line = explain(said, privileged=privileged)
    assert line.startswith(said) and fix in line, line


def test_an_unknown_o_word_is_refused_in_libfuses_words(array_v3, mountpoint):
    result = run_with_timeout([*ZARRFUSE, "mount", array_v3, mountpoint, "-o", "zzzword"],
                              check=False)
    try:
        assert result.returncode == 1
        assert result.stderr.strip() == (
            f"zarrfuse: cannot mount at {mountpoint}: fuse: unknown option(s): `-o zzzword': "
            "an -o option neither libfuse nor zarrfuse knows")
    finally:
        force_unmount(mountpoint)
