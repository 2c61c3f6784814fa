"""One version per read on S3 (issue 52, point 1): chunks stored as several objects
(concat-parts: data + ``.crc32c``, and a shard as ``.header`` + data + ``.index``) are
committed again and again through two writable mounts of one moto bucket while readers on
both and on a ``--read-only --metadata-ttl 1`` mount read them whole; every read must be
the bytes of exactly one version.

Each version's bytes are derived from its number, written into the chunk: a read whose
checksum, header or index disagrees with its data, or whose data is not what its number
gives, is torn. Readers and writers are processes of their own (``python -c``), never the
moto server's.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from zarr.codecs import BytesCodec, Crc32cCodec

import zarrfuse
from tests.mounting import mounted, requires_fuse, run_with_timeout
from tests.s3server import S3Server, server_with_bucket

pytestmark = [requires_fuse, pytest.mark.fuse, pytest.mark.timeout(240)]

BUCKET = "zarrfuse-versions"
CHUNKS = 4
"""Chunks per array; the first writable mount commits the first half, the second the rest."""
CRC_BYTES = 16 << 10
"""The data part of a crc chunk."""
INNER, PER_SHARD = 1024, 4
"""A shard's inner chunks: their size, and how many (one is left out, which one by version)."""
HEADER = 8
INDEX = PER_SHARD * 16 + 4
SECONDS = 30.0
"""How long each kind is committed and read: the issue's floor, 30 s, for each kind."""

CRC_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}]
SHARD_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": HEADER}, {"key_suffix": ""},
    {"key_suffix": ".index", "size": INDEX}]}}]


# --- the versions: bytes from a number, and the check of a read ----------------------------


def _filler(version: int, n: int, salt: int = 0) -> bytes:
    return np.random.default_rng([version, salt]).integers(0, 256, n, dtype="u1").tobytes()


def crc_chunk(version: int) -> bytes:
    """Data (its version number first) then its crc32c: what zarr's crc32c codec stores."""
    data = struct.pack("<Q", version) + _filler(version, CRC_BYTES - 8)
    return data + struct.pack("<I", google_crc32c.value(data))


def shard_chunk(version: int) -> bytes:
    """A shard of PER_SHARD inner chunks with one left out: the header holds the version,
    the index (offsets from the shard's start, then its crc32c) says which is left out."""
    missing = version % PER_SHARD
    data, index, at = [], [], HEADER
    for j in range(PER_SHARD):
        if j == missing:
            index.append(struct.pack("<QQ", 2**64 - 1, 2**64 - 1))
            continue
        data.append(_filler(version, INNER, j + 1))
        index.append(struct.pack("<QQ", at, INNER))
        at += INNER
    body = b"".join(index)
    return (struct.pack("<Q", version) + b"".join(data) + body
            + struct.pack("<I", google_crc32c.value(body)))


def one_version(kind: str, read: bytes) -> bool:
    """Whether ``read`` is exactly one version's bytes."""
    if len(read) < 8:
        return False
    version = struct.unpack("<Q", read[:8])[0]
    return read == (crc_chunk if kind == "crc" else shard_chunk)(version)


# --- the processes -------------------------------------------------------------------------


def write_loop(kind: str, root: str, chunks: str, seconds: float) -> None:
    """Commit new versions of ``chunks`` (comma-separated indices) until ``seconds`` pass;
    prints how many commits succeeded and failed."""
    make = crc_chunk if kind == "crc" else shard_chunk
    mine = [int(c) for c in chunks.split(",")]
    done = failed = 0
    end = time.monotonic() + seconds
    version = 1000 * mine[0]
    while time.monotonic() < end:
        for c in mine:
            version += 1
            try:
                fd = os.open(f"{root}/c/{c}/0", os.O_WRONLY | os.O_TRUNC)
                try:
                    os.write(fd, make(version))
                finally:
                    os.close(fd)
                done += 1
            except OSError:
                failed += 1
    print(json.dumps({"commits": done, "failed": failed}))


def read_loop(kind: str, root: str, seconds: float) -> None:
    """Read every chunk whole, again and again, until ``seconds`` pass; prints the count of
    whole reads, torn reads (with the first few), and errors by errno."""
    counts: dict[str, int] = {"whole": 0, "torn": 0}
    errors: dict[str, int] = {}
    torn: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in range(CHUNKS):
            try:
                with open(f"{root}/c/{c}/0", "rb", buffering=0) as f:
                    read = f.read()
            except OSError as e:
                errors[str(e.errno)] = errors.get(str(e.errno), 0) + 1
                continue
            if one_version(kind, read):
                counts["whole"] += 1
            else:
                counts["torn"] += 1
                if len(torn) < 5:
                    torn.append(f"chunk {c}: {len(read)} bytes, header "
                                f"{struct.unpack('<Q', read[:8])[0] if len(read) >= 8 else None}")
    print(json.dumps({**counts, "errors": errors, "examples": torn}))


def _run(*args: str, timeout: float) -> dict:  # type: ignore[type-arg]
    code = ("import sys; from tests.storage import test_mount_s3_versions as t; "
            "getattr(t, sys.argv[1])(*sys.argv[2:-1], float(sys.argv[-1]))")
    result = run_with_timeout([sys.executable, "-c", code, *args], timeout,
                              cwd=Path(__file__).resolve().parents[2])
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the test ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3() -> S3Server:
    with server_with_bucket(BUCKET) as server:
        yield server


def _make_array(s3: S3Server, kind: str) -> str:
    url = f"s3://{BUCKET}/{kind}.zarr"
    options = {"endpoint_url": s3.url}
    if kind == "crc":
        a = zarrfuse.create_array(url, shape=(CHUNKS, CRC_BYTES), chunks=(1, CRC_BYTES),
                                  dtype="u1", fill_value=0, serializer=BytesCodec(),
                                  compressors=[Crc32cCodec()], storage_transformers=CRC_PARTS,
                                  storage_options=options)
    else:
        a = zarrfuse.create_array(url, shape=(CHUNKS, PER_SHARD * INNER),
                                  shards=(1, PER_SHARD * INNER), chunks=(1, INNER), dtype="u1",
                                  fill_value=0, serializer=BytesCodec(), compressors=None,
                                  storage_transformers=SHARD_PARTS, storage_options=options)
    a[:] = 1
    return url


# moto's own race, not ours: a GET that reads an object's buffer while a PUT or copy of the
# same key closes it fails inside moto (werkzeug logs "Error on request", ValueError: I/O
# operation on closed file) and the client is answered 500, which obstore retries. Seen once
# in a full run, under this test's load of commits and reads of one key.
@pytest.mark.expect_log(r"^Error on request", level=logging.ERROR)
@pytest.mark.parametrize("kind", ["crc", "shard"])
def test_every_read_is_one_version_while_two_mounts_commit(s3, tmp_path, kind):
    url = _make_array(s3, kind)
    endpoint = ["--storage-option", f"endpoint_url={s3.url}", "--layout", "source"]
    with (mounted(url, tmp_path / "w1", *endpoint) as w1,
          mounted(url, tmp_path / "w2", *endpoint) as w2,
          mounted(url, tmp_path / "ro", *endpoint, "--read-only", "--metadata-ttl", "1") as ro):
        for c in range(CHUNKS):  # every chunk holds a version before the readers start
            (w1 / f"c/{c}/0").write_bytes((crc_chunk if kind == "crc" else shard_chunk)(c))
        half = ",".join(map(str, range(CHUNKS // 2)))
        rest = ",".join(map(str, range(CHUNKS // 2, CHUNKS)))
        jobs = [("write_loop", kind, str(w1), half), ("write_loop", kind, str(w2), rest),
                ("read_loop", kind, str(w1)), ("read_loop", kind, str(w2)),
                ("read_loop", kind, str(ro))]
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = [pool.submit(_run, *job, str(SECONDS), timeout=SECONDS + 60)
                       for job in jobs]
            results = [f.result() for f in futures]
    writes, reads = results[:2], dict(zip(["w1", "w2", "ro"], results[2:], strict=True))
    assert all(w["commits"] > 5 for w in writes), writes
    torn = {name: r["torn"] for name, r in reads.items()}
    assert torn == {"w1": 0, "w2": 0, "ro": 0}, reads
    assert all(r["whole"] > 10 for r in reads.values()), reads
    # A read of parts that disagree for VERSION_SETTLE seconds is EIO: never here.
    assert all(sum(r["errors"].values()) <= r["whole"] // 20 for r in reads.values()), reads
