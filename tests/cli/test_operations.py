"""Operating zarrfuse: logs, ``zarrfuse verify`` and its progress bar, and the Dockerfile's
command.

Every mount here is real, every test that mounts unmounts in teardown (also on failure) and
times out rather than hangs. Stats and sd_notify are in test_stats_and_notify.py, ownership
and non-root mounts in test_permissions.py, the mount helper and fstab in
test_mount_helper.py, the systemd unit in test_systemd_unit.py.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec

import zarrfuse
from tests.cli.operating import REPO, chunk_files, foreground, mount_test
from tests.mounting import (
    ZARRFUSE,
    force_unmount,
    mounted,
    run_with_timeout,
    wait_for,
    wait_mounted,
    wait_unmounted,
)
from zarrfuse.progress import progress_bar, restart

# --- logs -----------------------------------------------------------------------------------

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) (\S+): (.*)$")


def log_messages(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        match = LOG_LINE.match(line)
        if match:
            out.append(f"{match[1]} {match[3]}")
    return out


@mount_test
def test_log_has_one_line_per_mount_and_unmount_with_the_reason(array_v3, tmp_path, mountpoint):
    log = tmp_path / "zarrfuse.log"
    with mounted(array_v3, mountpoint, "--log-file", str(log)):
        pass  # unmounted from outside by mounted()'s teardown
    with foreground(array_v3, mountpoint, "--log-file", str(log), "--read-only") as proc:
        assert wait_mounted(mountpoint, 30)
        # Its control socket answers only after its signal handler is set (the two tasks
        # start together; the socket is bound a worker thread's round trip later): a
        # SIGTERM now is heard, not the default death.
        assert wait_for(lambda: run_with_timeout([*ZARRFUSE, "stats", mountpoint],
                                                 check=False).returncode == 0, 30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    assert log_messages(log) == [
        f"INFO mounted array {array_v3} at {mountpoint} (writable)",
        f"INFO unmounted {mountpoint} (unmounted from outside (umount or fusermount3 -u))",
        f"INFO mounted array {array_v3} at {mountpoint} (read-only)",
        "INFO received SIGTERM, unmounting",
        f"INFO unmounted {mountpoint} (received SIGTERM)",
    ]


def test_foreground_failure_is_logged_with_the_reason(tmp_path, mountpoint):
    log = tmp_path / "zarrfuse.log"
    missing = tmp_path / "missing"
    result = run_with_timeout(
        [*ZARRFUSE, "mount", missing, mountpoint, "--foreground", "--log-file", log], 30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("zarrfuse: ")
    (message,) = log_messages(log)
    assert message.startswith("ERROR mount failed: ") and str(missing) in message


# --- zarrfuse verify ------------------------------------------------------------------------


def verify(*args, **kwargs) -> subprocess.CompletedProcess[str]:
    return run_with_timeout([*ZARRFUSE, "verify", *args], 120, check=False, **kwargs)


def test_verify_a_good_array(array_v3):
    result = verify(array_v3)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "verified 4 chunks of 1 array: 0 failed\n"
    assert result.stderr == ""  # not a terminal: no progress bar


def test_verify_names_a_corrupted_chunk(array_v3):
    (array_v3 / "c" / "1" / "0").write_bytes(b"not zstd at all")
    result = verify(array_v3)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAILED c/1/0: ")
    assert lines[1:] == ["verified 4 chunks of 1 array: 1 failed"]


def test_verify_a_group_with_sharded_and_concat_parts_arrays(tmp_path):
    root = tmp_path / "group"
    group = zarr.open_group(root, mode="w")
    group.create_array("plain", shape=(10,), chunks=(3,), dtype="i4")[:] = np.arange(10)
    sharded = group.create_array("sub/sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4),
                                 dtype="u2")
    sharded[:] = 7
    parts = zarrfuse.create_array(
        root / "parts", shape=(6,), chunks=(2,), dtype="u1", compressors=[Crc32cCodec()],
        storage_transformers=[{"name": "concat-parts", "configuration": {"parts": [
            {"key_suffix": ""}, {"key_suffix": ".crc", "size": 4}]}}],
    )
    parts[:] = np.arange(6, dtype="u1")
    (root / "notes").mkdir()  # not a Zarr node: ignored
    (root / "plain" / "c" / "3.12345.partial").write_bytes(b"junk")  # not a chunk key

    good = verify(root)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout == "verified 11 chunks of 3 arrays: 0 failed\n"  # 4 + 4 shards + 3

    shard = root / "sub" / "sharded" / "c" / "1" / "0"
    shard.write_bytes(shard.read_bytes()[:-3] + b"xyz")  # breaks the shard index checksum
    (root / "parts" / "c" / "2.crc").unlink()  # a chunk with a part missing
    bad = verify(root)
    assert bad.returncode == 1
    failed = [line.split(":")[0] for line in bad.stdout.splitlines()[:-1]]
    assert failed == ["FAILED parts/c/2", "FAILED sub/sharded/c/1/0"]
    assert bad.stdout.splitlines()[-1] == "verified 11 chunks of 3 arrays: 2 failed"


def test_verify_of_a_missing_source_is_one_line(tmp_path):
    result = verify(tmp_path / "missing")
    assert result.returncode == 1
    assert result.stderr.startswith("zarrfuse: ") and len(result.stderr.splitlines()) == 1


def test_verify_draws_a_progress_bar_on_a_terminal(array_v3):
    (array_v3 / "c" / "0" / "1").write_bytes(b"broken")
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*ZARRFUSE, "verify", str(array_v3)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=terminal, text=True,
        )
        os.close(terminal)
        out, _ = proc.communicate(timeout=120)
        drawn = b""
        while select.select([controller], [], [], 0.2)[0]:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
    assert proc.returncode == 1
    text = drawn.decode()
    assert "\r" in text and "verifying: 100% |" in text and "4/4 chunk" in text
    last = text.split("\r")[-2]  # what was drawn over the bar at the end: blanks
    assert text.endswith("\r") and last and not last.strip()  # erased when done
    assert out.splitlines()[0].startswith("FAILED c/0/1: ")  # results stay on stdout


def test_progress_bar_lines():
    def drawn(work) -> list[str]:
        stream = io.StringIO()
        bar = progress_bar(None, description="listing", unit="key", stream=stream, enabled=True)
        work(bar)
        bar.refresh()
        bar.close()
        return stream.getvalue().split("\r")

    assert any(line.startswith("listing: 7 key [") for line in drawn(lambda b: b.update(7)))
    lines = drawn(lambda b: (restart(b, 200, "copying"), b.update(50)))
    assert any(line.startswith("copying:  25% |") and " 50/200 key [" in line for line in lines)
    assert not lines[-1].strip()  # erased when closed


def test_progress_bar_is_silent_off_a_terminal(tmp_path, capsys):
    with open(tmp_path / "err", "w") as stream, progress_bar(3, stream=stream) as bar:
        bar.update(3)
        bar.write("a result")
    assert (tmp_path / "err").read_text() == ""
    assert capsys.readouterr().out == "a result\n"


# --- the Dockerfile -------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, per stage: (INSTRUCTION, arguments), continuations joined."""
    text = (REPO / "Dockerfile").read_text()
    logical = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), " ".join(args.split())))
    return stages


def test_dockerfile_runs_zarrfuse_mount_in_the_foreground():
    final = dict(dockerfile_stages()[-1])
    assert json.loads(final["ENTRYPOINT"]) == ["zarrfuse", "mount", "--foreground"]
    assert json.loads(final["CMD"]) == ["/data", "/mnt/zarr"]
    assert final["STOPSIGNAL"] == "SIGTERM"


def test_dockerfile_copies_what_exists_and_dockerignore_lets_it_through():
    ignore = (REPO / ".dockerignore").read_text().split()
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction == "COPY" and not args.startswith("--from"):
                *sources, _ = args.split()
                for source in sources:
                    assert (REPO / source).exists(), source
                    assert f"!{source.rstrip('/')}/" in ignore or f"!{source}" in ignore, source


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="needs apt-cache")
def test_dockerfile_apt_packages_exist_in_bookworm():
    """The image is Debian 12 (bookworm), as this machine is: its apt knows the packages."""
    assert "bookworm" in dockerfile_stages()[0][0][1]
    packages = []
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction == "RUN" and "apt-get install" in args:
                words = args.split("apt-get install", 1)[1].split("&&")[0].split()
                packages += [w for w in words if not w.startswith("-")]
    assert {"fuse3", "libfuse3-dev", "gcc", "pkg-config"} <= set(packages)
    for package in packages:
        result = run_with_timeout(["apt-cache", "show", "--no-all-versions", package], 30,
                                  check=False)
        assert result.returncode == 0 and f"Package: {package}" in result.stdout, package


@mount_test
def test_dockerfile_entrypoint_serves_until_sigterm(array_v3, tmp_path, mountpoint):
    """What the container runs, run here: ENTRYPOINT + arguments, stopped as docker stop does."""
    entrypoint = json.loads(dict(dockerfile_stages()[-1])["ENTRYPOINT"])
    assert entrypoint[0] == "zarrfuse"
    bin_dir = Path(sys.executable).parent  # the venv's console script stands in for the image's
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [*entrypoint, str(array_v3), str(mountpoint), "--read-only"], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert wait_mounted(mountpoint, 30), "the entrypoint did not mount"
        assert len(chunk_files(mountpoint)) == 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert wait_unmounted(mountpoint)
    finally:
        force_unmount(mountpoint)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_docs_show_how_to_run_the_container():
    page = (REPO / "docs" / "configuration.md").read_text()
    section = page[page.index("## Docker") : page.index("## From the file manager")]
    for fragment in ("--device /dev/fuse", "--cap-add SYS_ADMIN", ":rshared", "docker run"):
        assert fragment in section, fragment
