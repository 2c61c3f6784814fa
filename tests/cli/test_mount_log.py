"""A background mount's log reaches the user (issue 23 point 3): it goes to syslog or a file
of its own by default, and ``zarrfuse log MOUNTPOINT`` prints why a write was refused."""

from __future__ import annotations

import logging
import os
import socket

import numpy as np
import pytest
import zarr

from tests.mounting import ZARRFUSE, force_unmount, is_mounted, run_with_timeout
from zarrfuse.cli import daemon
from zarrfuse.daemon import mount_log
from zarrfuse.fuse.config import MountConfig


def test_the_default_log_file_is_per_user_and_per_mount():
    env = {"HOME": "/home/ada", "XDG_STATE_HOME": "/home/ada/.state"}
    path = mount_log.default_log_file("/mnt/images", uid=1000, environ=env)
    assert path.startswith("/home/ada/.state/zarrfuse/log/mnt-images-") and path.endswith(".log")
    plain = mount_log.default_log_file("/mnt/images", uid=1000, environ={"HOME": "/home/ada"})
    assert plain.startswith("/home/ada/.local/state/zarrfuse/log/mnt-images-")
    assert mount_log.default_log_file("/mnt/images", uid=0).startswith("/var/log/zarrfuse/")
    # Two mountpoints that read alike get two files.
    assert mount_log.default_log_file("/mnt/a b", uid=0) != mount_log.default_log_file(
        "/mnt/a-b", uid=0)


def test_syslog_lines_are_tagged_zarrfuse(tmp_path):
    address = str(tmp_path / "log")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(address)
        server.settimeout(5)
        assert mount_log.syslog_address(address) == address
        assert mount_log.syslog_address(str(tmp_path)) is None  # not a socket
        handler = mount_log.syslog_handler(address)
        try:
            handler.setFormatter(logging.Formatter("%(message)s"))
            handler.emit(logging.makeLogRecord({"msg": "refused to store chunk (0, 0)"}))
            received = server.recv(4096)
        finally:
            handler.close()
    assert f"zarrfuse[{os.getpid()}]: refused to store chunk (0, 0)".encode() in received


@pytest.mark.fuse
@pytest.mark.timeout(120)
def test_zarrfuse_log_says_why_a_write_was_refused(tmp_path):
    source, mnt = tmp_path / "a.zarr", tmp_path / "mnt"
    zarr.create_array(source, data=np.arange(64 * 64, dtype="u2").reshape(64, 64),
                      chunks=(32, 32))
    mnt.mkdir()
    default_file = mount_log.default_log_file(str(mnt))
    run_with_timeout([*ZARRFUSE, "mount", source, mnt])  # background, no --log-file
    try:
        chunk = next(p for p in mnt.rglob("*") if p.is_file() and "zarr.json" not in p.name)
        # Not zstd: the write check refuses it at close.
        with pytest.raises(OSError), open(chunk, "wb") as f:
            f.write(b"not a chunk")
        result = run_with_timeout([*ZARRFUSE, "log", mnt])
        refusals = [line for line in result.stdout.splitlines() if "refused" in line]
        assert refusals, result.stdout
        assert "the whole log: " in result.stderr
        if mount_log.syslog_address() is None:  # else the lines went to syslog
            assert result.stderr.strip().endswith(default_file)
            with open(default_file, encoding="utf-8") as f:
                assert refusals[-1] in f.read()
            assert os.stat(default_file).st_mode & 0o777 == 0o600
        last = run_with_timeout([*ZARRFUSE, "log", mnt, "-n", "1"]).stdout.splitlines()
        assert len(last) == 1
    finally:
        force_unmount(mnt)
        assert not is_mounted(mnt)
        if os.path.exists(default_file):
            os.unlink(default_file)


def test_a_log_file_that_cannot_be_made_does_not_stop_the_mount(tmp_path, monkeypatch, capsys):
    """A user without a home directory still mounts; zarrfuse says the log goes nowhere."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setattr(mount_log, "default_log_file", lambda mountpoint: str(blocked / "x.log"))
    monkeypatch.setattr(mount_log, "syslog_address", lambda: None)
    config = MountConfig(source="/s", mountpoint="/m")
    assert daemon.with_default_log(config) == config
    err = capsys.readouterr().err
    assert err.startswith("zarrfuse: the mount logs nowhere: cannot create ")
    assert "--log-file" in err


def test_replies_the_kernel_no_longer_waited_for_are_not_errors(tmp_path):
    """pyfuse3 logs an ERROR when a reply finds its request gone (ENOENT: interrupted, or a
    release after its opener left); the mount's log keeps it at DEBUG, and real errors stay."""
    log = tmp_path / "daemon.log"
    try:
        for debug in (False, True):
            daemon.configure_logging(MountConfig(source="s", mountpoint=str(tmp_path),
                                                 log_file=str(log), debug=debug))
            pyfuse3_log = logging.getLogger("pyfuse3")
            pyfuse3_log.error("fuse_%s(): fuse_reply_* failed with %s", "release",
                              os.strerror(2))
            pyfuse3_log.error("fuse_%s(): fuse_reply_* failed with %s", "read",
                              os.strerror(22))
    finally:  # the test process's logging as it was: no file, warnings and up
        logging.basicConfig(level=logging.WARNING, handlers=[logging.NullHandler()],
                            force=True)
    lines = log.read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "ERROR pyfuse3: fuse_read(): fuse_reply_* failed with Invalid argument",
        "DEBUG pyfuse3: fuse_release(): fuse_reply_* failed with No such file or directory",
        "ERROR pyfuse3: fuse_read(): fuse_reply_* failed with Invalid argument",
    ]
