"""One table of mount options: flags, ``-o`` words, config files and the daemon's hand-off
all come from it and agree; no mounts here."""

from __future__ import annotations

import dataclasses

import pytest

from zarrfuse.cli import commands, daemon, mount_helper, options
from zarrfuse.cli.option_table import MOUNT_OPTIONS, NOT_OPTIONS, MountOption, markdown_table
from zarrfuse.fuse.config import MountConfig

# A value other than the default for every option: (text a user writes, value it means).
SAMPLES: dict[str, tuple[str, object]] = {
    "format": ("npy", "npy"),
    "colour": ("always", "always"),
    "watch": ("no", False),
    "update_pyramid": ("no", False),
    "read_only": ("yes", True),
    "nonempty": ("yes", True),
    "suffix": (".tif", ".tif"),
    "max_children": ("200", 200),
    "layout": ("source", "source"),
    "debug": ("yes", True),
    "log_file": ("/tmp/zarrfuse-test.log", "/tmp/zarrfuse-test.log"),
    "verify": ("no", False),
    "max_chunk_bytes": ("4096", 4096),
    "store_timeout": ("2.5", 2.5),
    "allow_redirects": ("yes", True),
    "cache_dir": ("/tmp/zarrfuse-cache", "/tmp/zarrfuse-cache"),
    "cache_size": ("3G", 3 << 30),
    "scratch_mb": ("0", 0),
    "uid": ("0", 0),
    "gid": ("0", 0),
    "umask": ("027", 0o027),
    "cache_mb": ("64", 64),
    "metadata_ttl": ("7", 7.0),
    "symlink_root": ("/", "/"),
}


def _parse_flags(*argv: str) -> MountConfig:
    args = commands.build_parser().parse_args(["mount", *argv])
    return commands.mount_config(args)


def _flag_argv(option: MountOption, text: str) -> list[str]:
    if option.kind == "value":
        return [option.flag, text]
    on = text == "yes"
    if option.kind == "toggle" and not on:
        return ["--no-" + option.flag[2:]]
    assert on, f"a switch flag can only turn {option.field} on"
    return [option.flag]


def test_the_table_covers_every_config_field():
    fields = {f.name for f in dataclasses.fields(MountConfig)}
    declared = [option.field for option in MOUNT_OPTIONS]
    assert len(declared) == len(set(declared))
    assert set(declared) == fields - NOT_OPTIONS
    assert set(SAMPLES) == set(declared), "give every new option a sample here"


@pytest.mark.parametrize("option", MOUNT_OPTIONS, ids=lambda o: o.field)
def test_flag_word_and_config_file_mean_the_same(option, tmp_path):
    text, expected = SAMPLES[option.field]
    by_flag = _parse_flags("/s", "/m", *_flag_argv(option, text))
    by_word = options.config_from(
        options.parse_options([f"{option.word}={text}"]), source="/s", mountpoint="/m"
    )
    conf = tmp_path / "m.conf"
    conf.write_text(f"source = /s\nmountpoint = /m\n{option.word.replace('_', '-')} = {text}\n")
    by_file = _parse_flags("--config", str(conf))
    helper, _ = mount_helper.parse(["/s", "/m", "-o", f"{option.word}={text}"])
    for config in (by_flag, by_word, by_file, helper):
        assert getattr(config, option.field) == expected, config
    default = getattr(MountConfig(source="/s", mountpoint="/m"), option.field)
    assert expected != default, "a sample must differ from the default"


def test_the_daemon_receives_every_option_whole():
    """The hand-off (JSON on a pipe) carries every field, storage secrets included."""
    values = {
        o.field: SAMPLES[o.field][1] for o in MOUNT_OPTIONS
        if o.field not in ("layout", "suffix", "max_children")  # the fanout view's own
    }
    values["read_only"] = True
    config = MountConfig(
        source="s3://bucket/a", mountpoint="/m", foreground=True,
        fuse_options=("allow_other",), storage_options={"secret": "s3cr3t"}, **values,
    )
    assert daemon.config_from_json(daemon.config_json(config)) == config


def test_switch_words_and_their_negations():
    assert options.parse_options(["ro"]).values == {"read_only": True}
    assert options.parse_options(["rw"]).values == {"read_only": False}
    assert options.parse_options(["ro=no"]).values == {"read_only": False}
    assert options.parse_options(["no_verify"]).values == {"verify": False}


def test_every_flag_is_in_help_and_every_word_in_the_table(capsys):
    with pytest.raises(SystemExit):
        commands.build_parser().parse_args(["mount", "--help"])
    rendered = capsys.readouterr().out
    table = markdown_table()
    for option in MOUNT_OPTIONS:
        assert option.flag in rendered
        assert f"`{option.word}" in table and option.flag in table
    assert "storage_option.KEY=VALUE" in table
