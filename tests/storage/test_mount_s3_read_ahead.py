"""Reading a directory of chunk files from S3 one file after another (``cp -r``) fetches
each file whole, and the next ones while the current one is read (issue 24 point 3): one
GET per file, never two, every byte exact, and a head-only read of a large object still
fetches only its start."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import zarrfuse
from tests.mounting import mounted, requires_fuse, run_with_timeout
from tests.s3server import S3Server, server_with_bucket

pytestmark = [requires_fuse, pytest.mark.fuse, pytest.mark.timeout(120)]

BUCKET = "zarrfuse-ahead"
FILES, SIZE = 24, 300_000


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with server_with_bucket(BUCKET) as server:
        yield server


def test_cp_of_a_directory_gets_each_file_once_and_exact(s3, tmp_path):
    options = {"endpoint_url": s3.url}
    data = np.random.default_rng(8).integers(0, 255, (1, FILES * SIZE), dtype="u1")
    zarrfuse.create_array(f"s3://{BUCKET}/row", data=data, chunks=(1, SIZE), compressors=None,
                          storage_options=options)
    with mounted(f"s3://{BUCKET}/row", tmp_path / "mnt", "--read-only",
                 f"--storage-option=endpoint_url={s3.url}") as mnt:
        row = mnt / "c/0/000/0"
        s3.reset()
        run_with_timeout(["cp", "-r", str(row), str(tmp_path / "copy")], 60)
        counts, sent = s3.snapshot()
    for i in range(FILES):
        copied = (tmp_path / "copy" / f"{i:03d}").read_bytes()
        assert copied == data[0, i * SIZE : (i + 1) * SIZE].tobytes(), i
    assert counts["GET"] <= FILES, counts  # whole files, fetched once (ahead or not)
    assert sent <= FILES * SIZE * 1.05, sent


def test_a_head_read_of_a_large_object_does_not_fetch_it_whole(s3, tmp_path):
    options = {"endpoint_url": s3.url}
    big = 16 << 20
    data = np.random.default_rng(9).integers(0, 255, (big,), dtype="u1")
    zarrfuse.create_array(f"s3://{BUCKET}/big", data=data, chunks=(big,), compressors=None,
                          storage_options=options)
    with mounted(f"s3://{BUCKET}/big", tmp_path / "mnt", "--read-only",
                 f"--storage-option=endpoint_url={s3.url}") as mnt:
        (chunk,) = [p for p in mnt.rglob("*") if p.is_file() and p.name != "zarr.json"]
        s3.reset()
        head = subprocess.run(
            [sys.executable, "-c", "import os, sys; f = os.open(sys.argv[1], os.O_RDONLY); "
             "sys.stdout.buffer.write(os.pread(f, 4096, 0))", chunk],
            capture_output=True, timeout=30, check=True).stdout
        _counts, sent = s3.snapshot()
    assert head == data[:4096].tobytes()
    assert sent <= 2 << 20, sent


def test_reading_the_heads_of_a_directory_of_files_fetches_nothing_ahead(s3, tmp_path):
    """A thumbnailer reads the start of each file: no file is read to its end, so nothing
    is fetched ahead, and the server sends about what was read."""
    options = {"endpoint_url": s3.url}
    data = np.random.default_rng(10).integers(0, 255, (1, 12 * 2_000_000), dtype="u1")
    zarrfuse.create_array(f"s3://{BUCKET}/heads", data=data, chunks=(1, 2_000_000),
                          compressors=None, storage_options=options)
    with mounted(f"s3://{BUCKET}/heads", tmp_path / "mnt", "--read-only",
                 f"--storage-option=endpoint_url={s3.url}") as mnt:
        files = sorted((mnt / "c/0/000/0").iterdir())
        s3.reset()
        script = ("import os, sys\n"
                  "for p in sys.argv[1:]:\n"
                  "    f = os.open(p, os.O_RDONLY); os.pread(f, 4096, 0); os.close(f)\n")
        subprocess.run([sys.executable, "-c", script, *map(str, files)], check=True,
                       timeout=60)
        _counts, sent = s3.snapshot()
    assert len(files) == 12
    assert sent <= 12 * (256 << 10), sent  # the kernel reads ahead a little, never whole files
