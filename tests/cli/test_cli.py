"""The ``zarrfuse`` command, driven as a user drives it: real processes, real FUSE mounts.

Bad sources and mountpoints must give one line on stderr and leave nothing mounted. Mount
lifecycle tests check the daemon contract: ``zarrfuse mount`` returns once the mount is live,
``zarrfuse umount`` and SIGTERM end it cleanly, and a daemon killed with SIGKILL leaves a dead
mount that neither ``zarrfuse umount`` nor a new ``zarrfuse mount`` is stopped by.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import pytest
import zarr

from tests.cli.commandline import (
    assert_left_nothing,
    assert_one_line_error,
    mount_test,
    needs_bindfs,
    zarrfuse,
)
from tests.mounting import (
    daemon_pids,
    force_unmount,
    is_dead_mount,
    is_mounted,
    run_with_timeout,
    wait_mounted,
)
from zarrfuse.cli import commands as cli
from zarrfuse.cli import daemon
from zarrfuse.errors import MountError
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mountpoint import prepare_mountpoint

# --- parsing: arguments into a MountConfig --------------------------------------------------


def parse_mount(*argv: str) -> MountConfig:
    return cli.mount_config(cli.build_parser().parse_args(["mount", *argv]))


def test_mount_arguments_become_a_frozen_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = parse_mount(
        "data/arr", "mnt/", "--suffix", ".tiff", "--max-children", "100", "--read-only",
        "-o", "allow_other, default_permissions", "-o", "ro", "--debug", "--log-file", "z.log",
        "--storage-option", "endpoint_url=http://127.0.0.1:9000/?a=b",
        "--storage-option", "anon=true",
        "--verify", "--max-chunk-bytes", "4096", "--scratch-mb", "0",
    )
    assert config == MountConfig(
        source=str(tmp_path / "data/arr"),
        mountpoint=str(tmp_path / "mnt"),
        suffix=".tiff",
        max_children=100,
        read_only=True,
        fuse_options=("allow_other", "default_permissions"),  # "ro" is zarrfuse's read_only
        debug=True,
        log_file=str(tmp_path / "z.log"),
        storage_options={"endpoint_url": "http://127.0.0.1:9000/?a=b", "anon": "true"},
        verify=True,
        max_chunk_bytes=4096,
        scratch_mb=0,
    )
    with pytest.raises(AttributeError):
        config.source = "elsewhere"  # type: ignore[misc]


def test_writes_are_verified_unless_no_verify():
    assert parse_mount("/s", "/m").verify and parse_mount("/s", "/m", "--verify").verify
    assert not parse_mount("/s", "/m", "--no-verify").verify


@pytest.mark.parametrize("source", ["s3://bucket/path/arr", "file:///data/arr", "memory://x"])
def test_urls_are_kept_as_given(source):
    assert parse_mount(source, "/mnt").source == source


@pytest.mark.parametrize("source", ["http://host/arr", "https://host/arr"])
def test_http_sources_mount_read_only(source):
    assert parse_mount(source, "/mnt").read_only
    assert not parse_mount("s3://bucket/arr", "/mnt").read_only


@pytest.mark.parametrize(("words", "said"), [
    ((), ["zarrfuse: mounting read-only: the --format ome-tiff view takes no writes "
          "(--read-only says this is meant)"]),
    (("--read-only",), []), (("-o", "ro"), [])])
def test_a_view_that_makes_the_mount_read_only_says_so_on_one_line(words, said, capsys):
    assert parse_mount("/s", "/m", "--format", "ome-tiff", *words).read_only
    assert capsys.readouterr().err.splitlines() == said
    assert not parse_mount("/s", "/m", "--format", "tiff").read_only
    assert parse_mount("https://host/arr", "/m").read_only  # no view: the source
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("text, ttl", [("0", 0.0), ("2.5", 2.5), ("60", 60.0)])
def test_metadata_ttl(text, ttl):
    assert parse_mount("/s", "/m", f"--metadata-ttl={text}").metadata_ttl == ttl


@pytest.mark.parametrize("text", ["-1", "soon", "inf", "nan"])
def test_bad_metadata_ttl_is_a_usage_error(text, capsys):
    assert cli.main(["mount", "/s", "/m", f"--metadata-ttl={text}"]) == 2
    assert "seconds" in capsys.readouterr().err


def test_zip_and_relative_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_mount("a.zip", "m").source == str(tmp_path / "a.zip")
    assert parse_mount("../x", "m").source == str(tmp_path.parent / "x")


EVERY_FIELD = {
    "source": "/data/arr", "mountpoint": "/mnt/a b", "suffix": "-odd", "max_children": 250,
    "read_only": True, "nonempty": True, "foreground": True,
    "fuse_options": ("allow_other", "max_read=1048576"),
    "debug": True, "log_file": "/var/log/z.log", "storage_options": {"key": "a=b,c", "-x": ""},
    "verify": False, "max_chunk_bytes": 12345, "scratch_mb": 0, "uid": 1234, "gid": 0,
    "umask": 0o027, "format": "png", "colour": "never", "watch": False, "cache_mb": 7,
    "update_pyramid": False,
    "metadata_ttl": 0.25,
    "layout": "fanout",  # source excludes suffix, max_children and format: checked below
    "symlink_root": "/data",
    "cache_dir": "/var/cache/zarrfuse", "cache_size": 5 << 30, "store_timeout": 2.5,
    "allow_redirects": True,
}


def test_the_daemon_gets_the_whole_config_through_its_pipe():
    """Every MountConfig field reaches the daemon (JSON on --config-fd), unchanged."""
    assert set(EVERY_FIELD) == {f.name for f in fields(MountConfig)}, "add the new field here"
    for config in (MountConfig(**EVERY_FIELD), MountConfig("/s", "/m"),
                   MountConfig("/s", "/m", layout="source")):
        assert daemon.config_from_json(daemon.config_json(config)) == config
        read, write = os.pipe()
        os.write(write, daemon.config_json(config))
        os.close(write)
        assert daemon.read_config(read) == config


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["mount"],
        ["mount", "src"],
        ["mount", "src", "mnt", "--max-children", "many"],
        ["mount", "src", "mnt", "--max-children", "0"],
        ["mount", "src", "mnt", "--storage-option", "novalue"],
        ["mount", "src", "mnt", "--scratch-mb", "-1"],
        ["mount", "src", "mnt", "--no-such-option"],
        ["umount"],
        ["unmount", "mnt"],
    ],
)
def test_usage_errors_exit_2(argv, tmp_path):
    result = zarrfuse(*argv, cwd=tmp_path)
    assert result.returncode == 2, result
    assert "usage:" in result.stderr
    assert "Traceback" not in result.stderr


def test_main_returns_exit_status_without_raising(capsys):
    assert cli.main(["--version"]) == 0
    assert cli.main(["mount"]) == 2
    assert cli.main(["umount", "/nonexistent/zarrfuse-test"]) == 1
    last_line = capsys.readouterr().err.splitlines()[-1]
    assert last_line == "zarrfuse: /nonexistent/zarrfuse-test does not exist"


# --- bad sources: one line, nothing mounted -------------------------------------------------


def _missing(tmp: Path) -> Path:
    return tmp / "no-such-array"


def _no_zarr_json(tmp: Path) -> Path:
    (tmp / "plain").mkdir()
    (tmp / "plain" / "data.bin").write_bytes(b"123")
    return tmp / "plain"


def _malformed_json(tmp: Path) -> Path:
    (tmp / "bad").mkdir()
    (tmp / "bad" / "zarr.json").write_text("{not json")
    return tmp / "bad"


def _zarr_v2_unknown_codec(tmp: Path) -> Path:
    zarr.create_array(tmp / "v2", shape=(4,), chunks=(2,), dtype="u1", zarr_format=2)
    zarray = json.loads((tmp / "v2/.zarray").read_text())
    (tmp / "v2/.zarray").write_text(json.dumps({**zarray, "compressor": {"id": "nonexistent"}}))
    return tmp / "v2"


def _edited_v3(tmp: Path, edit: Callable[[dict], None]) -> Path:
    path = tmp / "edited"
    zarr.create_array(path, shape=(4,), chunks=(2,), dtype="u1")
    meta = json.loads((path / "zarr.json").read_text())
    edit(meta)
    (path / "zarr.json").write_text(json.dumps(meta))
    return path


def _unknown_chunk_key_encoding(tmp: Path) -> Path:
    return _edited_v3(tmp, lambda m: m.update(chunk_key_encoding={"name": "nonexistent"}))


def _unknown_storage_transformer(tmp: Path) -> Path:
    transformer = {"name": "nonexistent", "configuration": {}}
    return _edited_v3(tmp, lambda m: m.update(storage_transformers=[transformer]))


@pytest.mark.parametrize(
    ("make_source", "fragment"),
    [
        (_missing, "does not exist"),
        (_no_zarr_json, "zarr.json"),
        (_malformed_json, "not valid JSON"),
        (_zarr_v2_unknown_codec, "unsupported Zarr v2 array"),
        (_unknown_chunk_key_encoding, "nonexistent"),
        (_unknown_storage_transformer, "nonexistent"),
    ],
    ids=["missing", "no-zarr-json", "malformed-zarr-json", "zarr-v2", "unknown-encoding",
         "unknown-transformer"],
)
def test_bad_source_is_one_line_and_mounts_nothing(make_source, fragment, tmp_path, mountpoint):
    source = make_source(tmp_path)
    # Refused by the parent, no daemon wait: the test fails past 20 s.
    result = zarrfuse("mount", source, mountpoint, timeout=20)
    assert_one_line_error(result, fragment)
    assert_left_nothing(mountpoint)


def test_bad_source_in_foreground_is_one_line_too(tmp_path, mountpoint):
    result = zarrfuse("mount", _malformed_json(tmp_path), mountpoint, "--foreground")
    assert_one_line_error(result, "not valid JSON")
    assert_left_nothing(mountpoint)


def test_bad_source_with_debug_shows_the_traceback(tmp_path, mountpoint):
    result = zarrfuse("mount", _missing(tmp_path), mountpoint, "--debug")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("zarrfuse: ")


# --- bad mountpoints ------------------------------------------------------------------------


def test_missing_mountpoint(array_v3, tmp_path):
    result = zarrfuse("mount", array_v3, tmp_path / "nowhere")
    assert_one_line_error(result, "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_mountpoint_that_is_a_file(array_v3, tmp_path):
    (tmp_path / "file").write_text("x")
    result = zarrfuse("mount", array_v3, tmp_path / "file")
    assert_one_line_error(result, "not a directory")
    assert_left_nothing(tmp_path / "file")


@contextmanager
def bind_mounted(source: Path, target: Path) -> Iterator[Path]:
    """A plain (non-FUSE) ``mount --bind``, always undone."""
    run_with_timeout(["mount", "--bind", source, target], 10)
    try:
        yield target
    finally:
        run_with_timeout(["umount", "-l", target], 10, check=False)


@mount_test
def test_mountpoint_already_mounted_is_refused_and_left_alone(array_v3, tmp_path, mountpoint):
    other = tmp_path / "other"
    other.mkdir()
    (other / "marker").write_text("bound")
    with bind_mounted(other, mountpoint):
        result = zarrfuse("mount", array_v3, mountpoint)
        assert_one_line_error(result, "already mounted")
        assert (mountpoint / "marker").read_text() == "bound"  # still the bind mount
        assert daemon_pids(mountpoint) == []
    assert not is_mounted(mountpoint)


def test_unwritable_log_file_is_one_line(array_v3, tmp_path, mountpoint):
    result = zarrfuse("mount", array_v3, mountpoint, "--log-file", tmp_path)
    assert_one_line_error(result, "Is a directory")
    assert_left_nothing(mountpoint)


# --- zarrfuse umount, against FUSE mounts made by bindfs --------------------------------------


@contextmanager
def bindfs_mounted(source: Path, target: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A FUSE mount served by a foreground ``bindfs``; unmounted and stopped on exit."""
    proc = subprocess.Popen(["bindfs", "-f", str(source), str(target)], stderr=subprocess.DEVNULL)
    try:
        assert wait_mounted(target, 10), "bindfs did not mount"
        yield proc
    finally:
        force_unmount(target)
        proc.kill()
        proc.wait(10)


@pytest.fixture
def plain_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    path.mkdir()
    (path / "hello").write_text("hello")
    return path


def test_umount_when_not_mounted(mountpoint):
    assert_one_line_error(zarrfuse("umount", mountpoint), "not mounted")


def test_umount_of_a_missing_path(tmp_path):
    assert_one_line_error(zarrfuse("umount", tmp_path / "nowhere"), "does not exist")


@mount_test
def test_umount_refuses_a_non_fuse_mount(plain_dir, mountpoint):
    with bind_mounted(plain_dir, mountpoint):
        assert_one_line_error(zarrfuse("umount", mountpoint), "not a FUSE mount")
        assert is_mounted(mountpoint)


@pytest.mark.parametrize("how", ["live", "busy", "busy-file", "dead"])
@needs_bindfs
@mount_test
def test_umount_of_a_fuse_mount(how, plain_dir, mountpoint):
    """A busy mount is detached lazily, and the line names the processes that hold it (a
    working directory, an open file), by PID and command line."""
    with bindfs_mounted(plain_dir, mountpoint) as bindfs:
        assert (mountpoint / "hello").read_text() == "hello"
        holder = None
        if how == "busy":
            holder = subprocess.Popen(["sleep", "60"], cwd=mountpoint)
        if how == "busy-file":
            with open(mountpoint / "hello", "rb") as held:
                holder = subprocess.Popen(["sleep", "61"], stdin=held)
        if how == "dead":
            bindfs.kill()
            bindfs.wait(10)
            assert is_dead_mount(mountpoint)
        try:
            result = zarrfuse("umount", mountpoint)
            assert result.returncode == 0, result
            assert not is_mounted(mountpoint)
            why = {"busy": f"busy, held by PID {holder and holder.pid} (sleep 60)",
                   "busy-file": f"busy, held by PID {holder and holder.pid} (sleep 61)",
                   "dead": "dead"}.get(how)
            lazily = [f"zarrfuse: {mountpoint} was {why}: detached it lazily"]
            assert result.stderr.splitlines() == ([] if how == "live" else lazily)
        finally:
            if holder is not None:
                holder.kill()
                holder.wait(10)


@needs_bindfs
@mount_test
def test_prepare_mountpoint_detaches_a_dead_mount_and_refuses_a_live_one(plain_dir, mountpoint):
    with bindfs_mounted(plain_dir, mountpoint) as bindfs:
        with pytest.raises(MountError, match="already mounted"):
            prepare_mountpoint(str(mountpoint))
        bindfs.kill()
        bindfs.wait(10)
        assert is_dead_mount(mountpoint)
        prepare_mountpoint(str(mountpoint))
        assert not is_mounted(mountpoint)
        assert os.listdir(mountpoint) == []
