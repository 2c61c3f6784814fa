"""Mounting arrays and groups that live on S3: a moto server on 127.0.0.1, real FUSE mounts.

Request counts are taken at the server (tests/s3server.py), so they are what the mount
really asked, whatever its own counters say.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest
import zarr

import zarrfuse
from tests.mounting import MountClock, daemon_pids, mounted, requires_fuse, run_with_timeout
from tests.s3server import CREDENTIALS, S3Server, aws_environment
from zarrfuse.api import arrays as api
from zarrfuse.errors import ConfigurationError, SourceError

pytestmark = [requires_fuse, pytest.mark.fuse]

BUCKET = "zarrfuse-test"
MiB = 1 << 20


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """One server for the module, with a bucket; credentials in the environment (the
    mount daemons inherit it, and find them there as on any machine)."""
    with aws_environment(CREDENTIALS), S3Server() as server:
        client(server).create_bucket(Bucket=BUCKET)
        yield server


def client(server: S3Server):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")


def options(server: S3Server) -> dict[str, str]:
    return {"endpoint_url": server.url}


def endpoint(server: S3Server) -> list[str]:
    return ["--storage-option", f"endpoint_url={server.url}"]


def stored(server: S3Server, key: str) -> bytes:
    return client(server).get_object(Bucket=BUCKET, Key=key)["Body"].read()


def keys_under(server: S3Server, prefix: str) -> dict[str, int]:
    pages = client(server).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


def random_array(server: S3Server, path: str, shape, chunks, **kwargs) -> np.ndarray:  # type: ignore[no-untyped-def]
    data = np.random.default_rng(7).integers(1, 255, size=shape, dtype="u1")  # never fill
    a = zarrfuse.create_array(
        f"s3://{BUCKET}/{path}", shape=shape, chunks=chunks, dtype="u1", compressors=None,
        fill_value=0, storage_options=options(server), **kwargs,
    )
    a[:] = data
    return data


def files_under(root: Path) -> dict[str, int]:
    """``find -type f`` with sizes, run as a subprocess (never I/O from a server process)."""
    out = run_with_timeout(["find", root, "-type", "f", "-printf", "%P %s\n"]).stdout
    return {name: int(size) for name, size in (line.rsplit(" ", 1) for line in out.splitlines())}


def chunk_files(mnt: Path) -> list[Path]:
    """The chunk files of the array mounted at ``mnt``, in grid order."""
    return [mnt / "c" / name for name in sorted(files_under(mnt / "c"))]


# --- sources and options ----------------------------------------------------------------------


def test_open_array_and_unknown_storage_option(s3):
    data = random_array(s3, "api/a", (6, 5), (3, 5))
    assert (api.open_array(f"s3://{BUCKET}/api/a", storage_options=options(s3))[:] == data).all()
    with pytest.raises(ConfigurationError, match="unknown storage option colour"):
        api.open_array(f"s3://{BUCKET}/api/a", storage_options={"colour": "red"})
    with pytest.raises(ConfigurationError, match="anon='maybe'"):
        api.open_array(f"s3://{BUCKET}/api/a", storage_options={"anon": "maybe"})


def test_credentials_from_a_profile_in_the_aws_files(s3, tmp_path, monkeypatch):
    random_array(s3, "profile/a", (2,), (2,))
    client(s3).put_object_acl(Bucket=BUCKET, Key="profile/a/zarr.json", ACL="public-read")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role lookups
    (tmp_path / "credentials").write_text(
        "[zf]\naws_access_key_id = a\naws_secret_access_key = b\n")
    (tmp_path / "config").write_text("[profile zf]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    url = f"s3://{BUCKET}/profile/a"
    assert api.open_array(url, storage_options={**options(s3), "profile": "zf"}).shape == (2,)
    with pytest.raises(SourceError, match="AWS profile 'nope' not found"):
        api.open_array(url, storage_options={**options(s3), "profile": "nope"})
    with pytest.raises(SourceError, match="no AWS credentials found"):
        api.open_array(url, storage_options=options(s3))
    # Public objects: no credentials needed.
    assert api.open_array(url, storage_options={**options(s3), "anon": "true"}).shape == (2,)


def test_missing_array_is_a_one_line_error(s3, mountpoint):
    result = run_with_timeout(
        [sys.executable, "-m", "zarrfuse", "mount", f"s3://{BUCKET}/nothing/here", mountpoint,
         *endpoint(s3)], check=False,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no zarr.json" in result.stderr


# --- reading ----------------------------------------------------------------------------------


def test_mount_lists_with_one_list_per_directory_and_reads_every_chunk(s3, tmp_path):
    data = random_array(s3, "read/a", (6, 40), (1, 1))  # 6 store directories of 40 chunks
    with mounted(f"s3://{BUCKET}/read/a", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        s3.reset()  # mounting read zarr.json
        listing = run_with_timeout(["ls", "-lR", mnt]).stdout
        counts, _ = s3.snapshot()
        assert listing.count(" 1 ") >= 240  # every chunk file, one byte each
        # c/ (which rows are stored) and six leaf directories, one LIST each; none per entry.
        assert counts["LIST"] == 7, counts
        assert counts["HEAD"] == 0 and counts["GET"] == 0, counts
        files = files_under(mnt / "c")
        assert len(files) == 240 and set(files.values()) == {1}
        out = run_with_timeout(
            ["sh", "-c", "find c -type f | sort | xargs cat | od -An -tu1 -v"], cwd=mnt
        ).stdout
        # fanout paths sort in grid order (row major): the bytes are the array's
        assert [int(v) for v in out.split()] == data.ravel().tolist()
        counts, _ = s3.snapshot()
        assert counts["LIST"] == 7 and counts["HEAD"] == 0, counts


def test_sequential_read_prefetches_in_large_windows(s3, tmp_path):
    data = random_array(s3, "seq/a", (40 * MiB,), (40 * MiB,))
    with mounted(f"s3://{BUCKET}/seq/a", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        (chunk,) = chunk_files(mnt)
        s3.reset()
        copy = tmp_path / "copy"
        run_with_timeout(["cp", chunk, copy])
        assert copy.read_bytes() == data.tobytes()
        counts, sent = s3.snapshot()
    # One GET per kernel request (1 MiB) would be 40; windows of 8 MiB need about 6.
    assert counts["GET"] <= 10, counts
    assert sent <= 41 * MiB, sent


def test_ranged_read_fetches_only_what_it_needs(s3, tmp_path):
    data = random_array(s3, "range/a", (32 * MiB,), (32 * MiB,))
    with mounted(f"s3://{BUCKET}/range/a", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        (chunk,) = chunk_files(mnt)
        s3.reset()
        piece = subprocess.run(
            [sys.executable, "-c", "import os, sys; f = os.open(sys.argv[1], os.O_RDONLY); "
             "sys.stdout.buffer.write(os.pread(f, 4096, 20 * 2**20 + 123))", chunk],
            capture_output=True, timeout=30, check=True,
        ).stdout
        counts, sent = s3.snapshot()
    assert piece == data.tobytes()[20 * MiB + 123 : 20 * MiB + 123 + 4096]
    # The kernel may read ahead around the page, but nothing like the whole 32 MiB object.
    assert 4096 <= sent <= 2 * MiB, sent
    assert counts["GET"] <= 2, counts


def test_head_of_a_large_file_fetches_little_more_than_it_reads(s3, tmp_path):
    data = random_array(s3, "head/a", (16 * MiB,), (16 * MiB,))
    with mounted(f"s3://{BUCKET}/head/a", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        (chunk,) = chunk_files(mnt)
        s3.reset()
        head = subprocess.run(["head", "-c", "65536", chunk], capture_output=True, timeout=30,
                              check=True).stdout
        _, sent = s3.snapshot()
    assert head == data.tobytes()[:65536]
    # The kernel reads ahead a little and so does the mount once reads look sequential,
    # growing from the read's size: far from the 16 MiB object or an 8 MiB window.
    assert sent <= 2 * MiB, sent


def test_ranged_read_returns_the_right_bytes(s3, tmp_path):
    data = random_array(s3, "range2/a", (8 * MiB,), (8 * MiB,))
    with mounted(f"s3://{BUCKET}/range2/a", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        (chunk,) = chunk_files(mnt)
        for offset, size in ((0, 100), (5 * MiB + 7, 70000), (8 * MiB - 10, 10)):
            out = subprocess.run(
                ["dd", f"if={chunk}", "bs=1", f"skip={offset}", f"count={size}",
                 "iflag=skip_bytes,count_bytes", "status=none"],
                capture_output=True, timeout=30, check=True,
            ).stdout
            assert out == data.tobytes()[offset : offset + size]


def test_group_on_s3(s3, tmp_path):
    store_path = zarr.core.sync.sync(
        api.open_store_path(f"s3://{BUCKET}/grp", mode="a", storage_options=options(s3))
    )
    root = zarr.create_group(store_path)
    root.create_group("sub")
    a = random_array(s3, "grp/sub/b", (4,), (2,))
    c = random_array(s3, "grp/c", (3,), (3,))
    s3.reset()
    with mounted(f"s3://{BUCKET}/grp", tmp_path / "mnt", "--read-only", *endpoint(s3)) as mnt:
        names = files_under(mnt)
        assert {"zarr.json", "c/zarr.json", "sub/zarr.json", "sub/b/zarr.json"} <= names.keys()
        assert len(names) == 4 + 1 + 2
        assert [p.read_bytes() for p in chunk_files(mnt / "sub" / "b")] == [
            a.tobytes()[:2], a.tobytes()[2:]]
        assert [p.read_bytes() for p in chunk_files(mnt / "c")] == [c.tobytes()]
        counts, _ = s3.snapshot()
    # The root and "sub" listed once each (one LIST per directory), plus the arrays' chunks.
    assert counts["HEAD"] == 0, counts


def test_concat_parts_array_on_s3(s3, tmp_path):
    transformer = [{"name": "concat-parts", "configuration": {
        "parts": [{"key_suffix": ".head", "size": 3}, {"key_suffix": ""}]}}]
    data = random_array(s3, "parts/a", (10,), (5,), storage_transformers=transformer)
    assert keys_under(s3, "parts/a/c/") == {
        "parts/a/c/0.head": 3, "parts/a/c/0": 2, "parts/a/c/1.head": 3, "parts/a/c/1": 2}
    with mounted(f"s3://{BUCKET}/parts/a", tmp_path / "mnt", *endpoint(s3)) as mnt:
        first, second = chunk_files(mnt)
        assert sorted(files_under(mnt / "c").values()) == [5, 5]
        assert second.read_bytes() == data.tobytes()[5:]
        s3.reset()
        run_with_timeout(["sh", "-c", f"printf ABCDE > {first}"])
        counts, _ = s3.snapshot()
        assert stored(s3, "parts/a/c/0.head") == b"ABC" and stored(s3, "parts/a/c/0") == b"DE"
        # A two-part commit, crash-atomic (object_journal): two temp PUTs, the commit record,
        # two server-side copies (PUT-class), one bulk DELETE; nothing left in the journal.
        assert (counts["PUT"], counts["POST"]) == (5, 1), counts
        assert not [k for k in keys_under(s3, "parts/a/") if ".zarrfuse-commits" in k]
    assert api.open_array(f"s3://{BUCKET}/parts/a", storage_options=options(s3))[:5].tobytes() == (
        b"ABCDE"
    )


def test_metadata_ttl_shows_objects_written_elsewhere(s3, tmp_path, monkeypatch):
    clock = MountClock(monkeypatch, tmp_path)
    random_array(s3, "ttl/a", (4,), (1,))
    client(s3).delete_object(Bucket=BUCKET, Key="ttl/a/c/3")
    with mounted(f"s3://{BUCKET}/ttl/a", tmp_path / "mnt", "--read-only", "--metadata-ttl=0.5",
                 *endpoint(s3)) as mnt:
        assert len(chunk_files(mnt)) == 3
        s3.reset()
        assert len(chunk_files(mnt)) == 3
        assert s3.snapshot()[0]["LIST"] == 0  # within the TTL: the cached listing
        assert files_under(mnt / "c") and chunk_files(mnt)[0].read_bytes() != b"\x07"
        # Another machine adds a chunk and replaces one.
        client(s3).put_object(Bucket=BUCKET, Key="ttl/a/c/3", Body=b"\x05")
        client(s3).put_object(Bucket=BUCKET, Key="ttl/a/c/0", Body=b"\x07")
        clock.ahead(1)
        files = chunk_files(mnt)
        assert len(files) == 4 and files[3].read_bytes() == b"\x05"
        assert files[0].read_bytes() == b"\x07"


# --- writing ----------------------------------------------------------------------------------


def test_write_is_one_put_and_delete_removes_the_object(s3, tmp_path):
    random_array(s3, "write/a", (4, 4 * MiB), (1, 2 * MiB))
    new = os.urandom(2 * MiB)
    source = tmp_path / "new"
    source.write_bytes(new)
    with mounted(f"s3://{BUCKET}/write/a", tmp_path / "mnt", *endpoint(s3)) as mnt:
        files = chunk_files(mnt)  # grid order: (0, 0), (0, 1), (1, 0) ...
        target, deleted = files[2 * 2 + 1], files[3 * 2 + 0]
        s3.reset()
        run_with_timeout(["cp", source, target])
        counts, _ = s3.snapshot()
        assert s3.per_key["PUT", f"{BUCKET}/write/a/c/2/1"] == 1, s3.per_key
        assert counts["PUT"] == 1, counts
        assert stored(s3, "write/a/c/2/1") == new
        assert run_with_timeout(["cmp", source, target]).returncode == 0
        run_with_timeout(["rm", deleted])
        assert "write/a/c/3/0" not in keys_under(s3, "write/a/")
        assert "write/a/c/3/1" in keys_under(s3, "write/a/")
        assert len(chunk_files(mnt)) == 7
    array = api.open_array(f"s3://{BUCKET}/write/a", storage_options=options(s3))
    assert array[2, 2 * MiB :].tobytes() == new
    assert not array[3, : 2 * MiB].any()  # deleted: fill value


def test_http_sources_are_read_only(tmp_path):
    data = np.arange(4, dtype="u1")
    zarr.create_array(tmp_path / "served", data=data, chunks=(2,), compressors=None)
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
        port = int(line.split(" port ")[1].split()[0])
        with mounted(f"http://127.0.0.1:{port}/served", tmp_path / "mnt") as mnt:
            first, second = chunk_files(mnt)
            assert second.read_bytes() == data.tobytes()[2:]
            result = run_with_timeout(["sh", "-c", f"printf xy > {first}"], check=False)
            assert result.returncode != 0 and "Read-only file system" in result.stderr
    finally:
        server.kill()
        server.wait(10)


# --- transient failures -----------------------------------------------------------------------

READER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
first = os.read(fd, 1 << 20)
print("read", len(first), flush=True)
sys.stdin.readline()  # the test stops the server now
start = time.monotonic()
try:
    while os.read(fd, 1 << 20):
        pass
    print("ok", flush=True)
except OSError as e:
    print("error", e.errno, round(time.monotonic() - start, 1), flush=True)
"""

WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
print("opened", flush=True)
sys.stdin.readline()  # the test stops the server now
os.write(fd, b"x")
try:
    os.close(fd)
    print("closed", flush=True)
except OSError as e:
    print("close", e.errno, flush=True)
"""


def started(script: str, path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, start_new_session=True,
    )


def test_server_outage_gives_eio_and_the_mount_recovers(s3, tmp_path):
    data = random_array(s3, "outage/a", (64 * MiB,), (32 * MiB,))
    with mounted(f"s3://{BUCKET}/outage/a", tmp_path / "mnt", *endpoint(s3)) as mnt:
        first, second = chunk_files(mnt)
        reader, writer = started(READER, second), started(WRITER, first)
        try:
            assert reader.stdout.readline().split() == ["read", str(MiB)]
            assert writer.stdout.readline().split() == ["opened"]
            s3.stop()
            try:
                out, _ = reader.communicate("go\n", timeout=60)
                words = out.split()
                assert words[:2] == ["error", str(errno.EIO)], out
                assert float(words[2]) < 45, out
                # A failed store reaches the writer's close(), and changes nothing.
                out, _ = writer.communicate("go\n", timeout=60)
                assert out.split() == ["close", str(errno.EIO)], out
            finally:
                s3.start()
        finally:
            for proc in (reader, writer):
                if proc.poll() is None:
                    proc.kill()
                proc.wait(10)
        # Back: the same mount serves again, and the failed write left the chunk as it was.
        copy = tmp_path / "copy"
        run_with_timeout(["cp", second, copy], timeout=60)
        assert copy.read_bytes() == data.tobytes()[32 * MiB :]
        assert stored(s3, "outage/a/c/0") == data.tobytes()[: 32 * MiB]
        print("EIO after", words[2], "s")


def test_unreachable_endpoint_fails_within_bounded_time(mountpoint):
    result = run_with_timeout(
        [sys.executable, "-m", "zarrfuse", "mount", f"s3://{BUCKET}/a", mountpoint,
         "--storage-option", "endpoint_url=http://127.0.0.1:1"],
        timeout=40, check=False, env={**os.environ, **CREDENTIALS},
    )  # the bound: the test fails past 40 s
    assert result.returncode == 1 and result.stderr.startswith("zarrfuse: ")


def test_no_secret_reaches_any_command_line_or_environment(s3, tmp_path):
    """A background mount's daemon gets its storage options through a pipe: the secret key
    given with --storage-option is in no process's /proc/PID/cmdline or environ."""
    random_array(s3, "secret/a", (4, 4), (2, 2))
    secret = "s3cr3t-" + os.urandom(8).hex()
    with mounted(f"s3://{BUCKET}/secret/a", tmp_path / "mnt", "--read-only", *endpoint(s3),
                 "--storage-option", "key=testing",
                 "--storage-option", f"secret={secret}") as mnt:
        assert sorted(p.name for p in mnt.iterdir())  # the mount works with those options
        seen = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            for name in ("cmdline", "environ"):
                try:
                    if secret.encode() in (proc / name).read_bytes():
                        seen.append(f"{proc.name}/{name}")
                except OSError:
                    continue
        assert daemon_pids(mnt), "no daemon found for the mount"
        assert not seen, seen
