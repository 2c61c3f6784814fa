"""Mount options as words (fstab's -o, config files) and the flags they mirror; no mounts here.

The mount helper, config files and ``zarrfuse mount`` flags must agree on every option, and
bad values must be refused with a message naming the option (or the file and line).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tests.mounting import ZARRFUSE, run_with_timeout
from zarrfuse.cli import commands as cli
from zarrfuse.cli import mount_helper, options
from zarrfuse.errors import ConfigurationError
from zarrfuse.fuse.config import MountConfig


def parse_mount(*argv: str) -> MountConfig:
    return cli.mount_config(cli.build_parser().parse_args(["mount", *argv]))


# --- the -o vocabulary ----------------------------------------------------------------------


def test_mount_minus_o_takes_zarrfuse_words_and_never_hands_secrets_to_libfuse():
    """``zarrfuse mount SRC MNT -o storage_option.secret=X`` (the fstab spelling on the
    command line) used to reach libfuse, which refused it and echoed the whole list."""
    config = parse_mount("s3://b/a", "/mnt/x", "-o", "storage_option.secret=TOPSECRET,ro",
                         "-o", "allow_other")
    assert config.storage_options == {"secret": "TOPSECRET"}
    assert config.read_only
    assert not any("TOPSECRET" in word for word in config.fuse_options)
    assert "allow_other" in config.fuse_options


def test_split_option_list_keeps_quoted_commas():
    assert options.split_option_list('ro,suffix=.tiff,,storage_option.k="a,b",allow_other') == [
        "ro", "suffix=.tiff", "storage_option.k=a,b", "allow_other",
    ]
    with pytest.raises(ConfigurationError, match="quote"):
        options.split_option_list('a="b')


def test_every_option_word_maps_to_its_field():
    parsed = options.parse_options(
        [
            "ro", "suffix=.tiff", "max_children=100", "verify", "max-chunk-bytes=4096",
            "scratch_mb=0", "uid=1234", "gid=root", "umask=027", "debug", "log_file=/var/l.log",
            "storage_option.endpoint_url=http://127.0.0.1:9000/?a=b", "storage_option.anon=true",
            "allow_other", "noexec", "max_read=131072",
            "defaults", "noauto", "nofail", "_netdev", "user", "x-systemd.automount",
            "x-systemd.idle-timeout=60", "comment=x", "relatime", "nodiratime",
        ]
    )
    assert parsed.values == {
        "read_only": True, "suffix": ".tiff", "max_children": 100, "verify": True,
        "max_chunk_bytes": 4096, "scratch_mb": 0, "uid": 1234, "gid": 0, "umask": 0o027,
        "debug": True, "log_file": "/var/l.log",
    }
    assert parsed.storage_options == {
        "endpoint_url": "http://127.0.0.1:9000/?a=b", "anon": "true",
    }
    assert parsed.fuse_options == ["allow_other", "noexec", "max_read=131072"]
    assert "nofail" in parsed.ignored and "x-systemd.automount" in parsed.ignored


def test_last_of_ro_and_rw_wins_and_switches_take_values():
    assert options.parse_options(["ro", "rw"]).values == {"read_only": False}
    assert options.parse_options(["verify=no", "debug=yes"]).values == {
        "verify": False, "debug": True,
    }


def test_no_verify_turns_the_default_check_off():
    assert options.parse_options(["no_verify"]).values == {"verify": False}
    assert options.parse_options(["no-verify=no"]).values == {"verify": True}
    assert options.parse_options(["no_verify", "verify"]).values == {"verify": True}  # last wins
    with pytest.raises(ConfigurationError, match="yes or no"):
        options.parse_options(["no_verify=perhaps"])


def test_no_verify_in_a_config_file_and_the_flag_over_it(tmp_path):
    conf = tmp_path / "a.conf"
    conf.write_text("source = arr\nmountpoint = /mnt/a\nno_verify\n")
    assert not parse_mount("--config", str(conf)).verify
    assert parse_mount("--config", str(conf), "--verify").verify


def test_user_names_resolve():
    name = pwd.getpwuid(os.getuid()).pw_name
    assert options.parse_options([f"uid={name}"]).values == {"uid": os.getuid()}


@pytest.mark.parametrize(
    ("word", "fragment"),
    [
        ("max_children=0", "positive"),
        ("max_children=lots", "integer"),
        ("scratch_mb=-1", "non-negative"),
        ("umask=999", "octal"),
        ("umask=1777", "between"),
        ("uid=no-such-user-zarrfuse", "no such user"),
        ("gid=no-such-group-zarrfuse", "no such group"),
        ("verify=maybe", "yes or no"),
        ("suffix", "needs a value"),
        ("storage_option.=x", "storage_option.KEY=VALUE"),
        ("storage_option.key", "storage_option.KEY=VALUE"),
        ("source=/x", "configuration file"),
    ],
)
def test_bad_option_words_are_refused_by_name(word, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        options.parse_options([word])


# --- config files ---------------------------------------------------------------------------

EXAMPLE = """\
# /etc/zarrfuse/images.conf
source = data/images.zarr
mountpoint = /mnt/images

ro
suffix = " .tiff"
max-children = 100
umask = 027
allow_other
storage_option.endpoint_url = http://127.0.0.1:9000/#not-a-comment
log_file = logs/images.log
nofail
"""


def test_config_file_becomes_a_mount_config(tmp_path):
    conf = tmp_path / "images.conf"
    conf.write_text(EXAMPLE)
    config = parse_mount("--config", str(conf))
    assert config == MountConfig(
        source=str(tmp_path / "data/images.zarr"),  # relative to the file's directory
        mountpoint="/mnt/images",
        suffix=" .tiff",
        max_children=100,
        read_only=True,
        umask=0o027,
        fuse_options=("allow_other",),
        storage_options={"endpoint_url": "http://127.0.0.1:9000/#not-a-comment"},
        log_file=str(tmp_path / "logs/images.log"),
    )


def test_command_line_flags_override_the_config_file(tmp_path):
    conf = tmp_path / "a.conf"
    conf.write_text(EXAMPLE)
    config = parse_mount(
        "--config", str(conf), "/other/src", "--suffix", ".raw", "--umask", "002",
        "-o", "noexec", "--storage-option", "endpoint_url=http://elsewhere",
        "--storage-option", "anon=1", "--foreground",
    )
    assert config.source == "/other/src" and config.mountpoint == "/mnt/images"
    assert config.suffix == ".raw" and config.umask == 0o002 and config.max_children == 100
    assert config.read_only and config.foreground
    assert config.fuse_options == ("allow_other", "noexec")
    assert config.storage_options == {"endpoint_url": "http://elsewhere", "anon": "1"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("source = /a\nmountpoint = /b\nmax_children = 0\n", ":3: max_children=0"),
        ("source = /a\nbad name = 1\n", ":2: expected NAME"),
        ("source = /a\n", "no mountpoint"),
    ],
)
def test_bad_config_files_name_file_and_line(tmp_path, text, fragment):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    with pytest.raises(ConfigurationError, match=fragment):
        parse_mount("--config", str(conf))


def test_config_file_errors_are_one_line_from_the_command(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("source = /a\nmountpoint = /b\numask = 8\n")
    result = run_with_timeout([*ZARRFUSE, "mount", "--config", conf], 30, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"zarrfuse: {conf}:3: umask '8': expected an octal number such as 022"
    ]


# --- flags ----------------------------------------------------------------------------------


def test_uid_gid_umask_flags():
    config = parse_mount("/s", "/m", "--uid", "1000", "--gid", "root", "--umask", "0077")
    assert (config.uid, config.gid, config.umask) == (1000, 0, 0o077)
    assert parse_mount("/s", "/m").umask == 0o022


@pytest.mark.parametrize(
    "argv",
    [
        ["mount", "src", "mnt", "--umask", "8"],
        ["mount", "src", "mnt", "--umask", "1000"],
        ["mount", "src", "mnt", "--uid", "no-such-user-zarrfuse"],
        ["mount", "--foreground"],
        ["umount"],
        ["umount", "mnt", "--config", "x.conf"],
        ["stats"],
        ["verify"],
    ],
)
def test_usage_errors_exit_2(argv, tmp_path):
    result = run_with_timeout([*ZARRFUSE, *argv], 30, check=False, cwd=tmp_path)
    assert result.returncode == 2, result
    assert "usage:" in result.stderr and "Traceback" not in result.stderr


# --- the mount helper's command line ---------------------------------------------------------


def test_mount_helper_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config, args = mount_helper.parse(
        ["src dir", "mnt", "-v", "-o", "ro,suffix=.tiff,nofail,allow_other", "-o",
         "uid=7,no_verify", "-t", "fuse.zarrfuse", "-sn"]
    )
    assert config == MountConfig(
        source=str(tmp_path / "src dir"), mountpoint=str(tmp_path / "mnt"), suffix=".tiff",
        read_only=True, fuse_options=("allow_other",), uid=7, verify=False,
    )
    assert args.verbose and args.sloppy and args.no_mtab and not args.fake


def test_mount_helper_fake_mount_does_nothing(tmp_path):
    argv = [str(tmp_path / "nowhere"), str(tmp_path / "m"), "-f", "-o", "ro"]
    assert mount_helper.main(argv) == 0
    assert not (tmp_path / "m").exists()


def test_mount_helper_bad_options_exit_1(tmp_path, capsys):
    assert mount_helper.main(["/src", "/mnt", "-o", "max_children=0"], prog="mount.x") == 1
    assert capsys.readouterr().err.startswith("mount.x: max_children=0")
    assert mount_helper.main(["/src", "/mnt", "-N", "/proc/1/ns/mnt"], prog="mount.x") == 1


def test_mount_helper_failure_exits_32(tmp_path, capsys):
    status = mount_helper.main([str(tmp_path / "missing"), str(tmp_path), "-o", "ro"], prog="m")
    assert status == 32
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/src", "/mnt", "-o", "ro,dev,suid"], True),  # mount.fuse3's call
        (["/src", "/mnt", "-oro"], True),
        (["mount", "/src", "/mnt", "-o", "allow_other"], False),
        (["unmount", "mnt"], False),
        (["/src", "/mnt"], False),
    ],
)
def test_mount_fuse3_form_is_recognised(argv, expected):
    assert cli._is_mount_helper_call(argv) is expected


def test_mount_fuse3_form_reaches_the_helper(tmp_path):
    result = run_with_timeout(
        [*ZARRFUSE, str(tmp_path / "missing"), str(tmp_path), "-o", "ro,dev,suid"], 30,
        check=False,
    )
    assert result.returncode == 32
    assert result.stderr.startswith("zarrfuse: ") and "does not exist" in result.stderr


def test_example_config_in_docs_parses(tmp_path):
    """The docs' example configuration file is valid."""
    readme = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    start = readme.index("# /etc/zarrfuse/images.conf")
    block = readme[start : readme.index("```", start)]
    conf = tmp_path / "images.conf"
    conf.write_text(block)
    config = parse_mount("--config", str(conf))
    assert config.source and config.mountpoint == "/mnt/images"
