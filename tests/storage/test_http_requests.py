"""What a web server is asked (issue 32): the whole image of a sharded array is read a
shard at a time, each shard's index fetched once per read (it was fetched again for every
inner chunk: two GETs per inner chunk), with no HEAD: an absent shard is the GET's 404 (the
fill value). Counted in nginx's own access log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.http_servers import nginx
from tests.mounting import mounted, wait_for

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def _whole_image_requests(tmp_path, expected: np.ndarray) -> tuple[int, int, int]:
    """Serve ``tmp_path/www/s.zarr`` by nginx, read its whole image through a fresh
    ``--format ome-tiff`` mount, check every pixel; the chunk requests nginx saw (HEAD, GET)
    and the daemon's fetch-pool threads after the read."""
    log = tmp_path / "nginx" / "access.log"
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            mounted(f"{url}/s.zarr", tmp_path / "mnt", "--read-only", "--format",
                    "ome-tiff") as mnt:
        before = log.read_text().count("\n")
        np.testing.assert_array_equal(tifffile.imread(mnt / "s.ome.tif"), expected)
        lines = [line for line in log.read_text().splitlines()[before:]
                 if "/s.zarr/c/" in line]
        fetch_threads = _threads_named(mnt, "zarrfuse-fetch")
    return (sum('"HEAD ' in line for line in lines), sum('"GET ' in line for line in lines),
            fetch_threads)


def test_a_sharded_whole_image_is_read_a_shard_at_a_time(tmp_path):
    data = (np.arange(256 * 256, dtype=np.uint32) * 2654435761 % 65521).astype("u2")
    data = data.reshape(256, 256)
    zarr.create_array(tmp_path / "www" / "s.zarr", data=data, chunks=(32, 32),
                      shards=(128, 128))
    heads, gets, _ = _whole_image_requests(tmp_path, data)
    # 4 shards of 16 inner chunks: zarr-python reads them in 4 GETs; issue 32's bound is
    # twice that. The old reads made 128 (the index, then the chunk, per inner chunk).
    assert gets <= 2 * 4, (heads, gets)


def test_a_shards_index_is_fetched_once_for_all_its_tiles(tmp_path):
    """Issue 32, point 2: a viewer opening the tiles of one shard one after another asks for
    the shard's index once (a suffix range), not once per tile as zarr-python's reads do."""
    data = (np.arange(256 * 256, dtype=np.uint32) * 40503 % 65521).astype("u2")
    data = data.reshape(256, 256)
    zarr.create_array(tmp_path / "www" / "s.zarr", data=data, chunks=(32, 32),
                      shards=(128, 128))
    log = tmp_path / "nginx" / "access.log"
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            mounted(f"{url}/s.zarr", tmp_path / "mnt", "--read-only", "--format",
                    "tiff") as mnt:
        before = log.read_text().count("\n")
        for y in range(4):
            for x in range(4):
                tile = tifffile.imread(mnt / "planes" / f"y{y:03}" / f"y{y:03}-x{x:03}.tiff")
                np.testing.assert_array_equal(tile, data[y * 32 : (y + 1) * 32,
                                                         x * 32 : (x + 1) * 32])
        lines = [line for line in log.read_text().splitlines()[before:]
                 if "/s.zarr/c/" in line]
    # The view decodes the tiles after a file's ahead, into the next shard too: one index
    # read per shard touched, and for the first shard at most one GET per tile besides.
    index_reads = [line.split('"')[1].split()[1] for line in lines if '"bytes=-' in line]
    assert sorted(index_reads) == sorted(set(index_reads)), lines
    assert "/s.zarr/c/0/0" in index_reads, lines
    first = [line for line in lines if '"GET /s.zarr/c/0/0 ' in line]
    assert len(first) <= 1 + 16, lines


def test_an_absent_shard_is_its_gets_404_and_no_head_is_sent(tmp_path):
    array = zarr.create_array(tmp_path / "www" / "s.zarr", shape=(256, 256), chunks=(32, 32),
                              shards=(128, 128), dtype="u2", fill_value=7)
    array[:128] = 3  # the second row of shards is never written
    expected = np.full((256, 256), 7, dtype="u2")
    expected[:128] = 3
    heads, gets, _ = _whole_image_requests(tmp_path, expected)
    assert heads == 0 and gets <= 2 * 4, (heads, gets)


def test_a_warm_cache_with_a_metadata_ttl_asks_a_web_server_for_no_chunk(tmp_path):
    """Issue 32, point 3: a web server cannot list, so each chunk's validator came from a
    HEAD, and a second mount on a warm ``--cache-dir`` sent one HEAD per chunk to find its
    cached bytes. With ``--metadata-ttl`` those answers are kept with the cache for that long,
    as listings are: the second mount asks for the documents only."""
    data = (np.arange(256 * 256, dtype=np.uint32) * 40503 % 65521).astype("u2").reshape(256, 256)
    data[192:] = 0  # the last row of chunks is the fill value: never stored, asked once
    zarr.create_array(tmp_path / "www" / "a.zarr", data=data, chunks=(64, 64), fill_value=0)
    log = tmp_path / "nginx" / "access.log"
    args = ("--read-only", "--format", "ome-tiff", "--cache-dir", str(tmp_path / "cache"),
            "--metadata-ttl", "600")
    with nginx(tmp_path / "www", tmp_path / "nginx") as url:
        asked = []
        for mount in ("first", "second"):
            with mounted(f"{url}/a.zarr", tmp_path / mount, *args) as mnt:
                before = log.read_text().count("\n")
                np.testing.assert_array_equal(tifffile.imread(mnt / "a.ome.tif"), data)
                asked.append([line.split('"')[1] for line in log.read_text().splitlines()[before:]
                              if "/a.zarr/c/" in line])
    assert len(asked[0]) >= 12, asked[0]  # the stored chunks were fetched once
    # each by one GET that also gave its size and time (point 3): before, a HEAD first
    assert all(request.startswith("GET ") for request in asked[0]), asked[0]
    assert asked[1] == [], asked[1]


def test_copying_a_directory_of_chunk_files_asks_once_per_file(tmp_path):
    """Issue 32, point 5: a web server cannot list, so each chunk file cost a HEAD (its size,
    when the kernel looked it up) and then a GET, one file after another. Once a file is read
    to its end, the next files come with one GET each, ahead: their size, time and bytes."""
    data = np.random.default_rng(4).integers(0, 60000, (64, 24 * 64)).astype("u2")
    zarr.create_array(tmp_path / "www" / "r.zarr", data=data, chunks=(64, 64))
    log = tmp_path / "nginx" / "access.log"
    with nginx(tmp_path / "www", tmp_path / "nginx") as url, \
            mounted(f"{url}/r.zarr", tmp_path / "mnt", "--read-only") as mnt:
        folder = next(Path(d) for d, _, files in os.walk(mnt) if len(files) == 24)
        before = log.read_text().count("\n")
        copy = tmp_path / "copy"
        subprocess.run(["cp", "-r", str(folder), str(copy)], check=True, timeout=60)
        lines = [line for line in log.read_text().splitlines()[before:]
                 if "/r.zarr/c/" in line]
    stored = sorted((tmp_path / "www" / "r.zarr" / "c" / "0" / str(i)).read_bytes()
                    for i in range(24))
    assert sorted(p.read_bytes() for p in copy.iterdir()) == stored  # the chunks' bytes
    heads = [line for line in lines if '"HEAD ' in line]
    gets = [line.split('"')[1].split()[1] for line in lines if '"GET ' in line]
    assert len(heads) <= 1, lines  # the first file's lookup; before: one per file (24)
    assert len(gets) == len(set(gets)) == 24, lines  # each file once


def test_a_lookup_asks_for_the_next_files_sizes_together_and_each_once(tmp_path):
    """A web server says a file's size per key, and the kernel looks files up one at a time
    (``ls -l``, a file manager, ``find``): a round trip per file, one after another. The
    lookup of one chunk file now asks for the next 8 files' sizes with it, at once; the
    lookups that follow wait for those answers instead of asking again."""
    data = np.random.default_rng(5).integers(0, 60000, (64, 24 * 64)).astype("u2")
    zarr.create_array(tmp_path / "www" / "r.zarr", data=data, chunks=(64, 64))
    log = tmp_path / "nginx" / "access.log"
    with nginx(tmp_path / "www", tmp_path / "nginx") as url:
        with mounted(f"{url}/r.zarr", tmp_path / "first", "--read-only") as mnt:
            folder = next(Path(d) for d, _, files in os.walk(mnt) if len(files) == 24)
            where, names = folder.relative_to(mnt), sorted(os.listdir(folder), key=int)
        with mounted(f"{url}/r.zarr", tmp_path / "mnt", "--read-only") as mnt:
            folder = mnt / where  # looked up by name: no directory listing first
            before = log.read_text().count("\n")
            size = os.stat(folder / names[0]).st_size  # one lookup

            def asked_so_far() -> list[str]:
                return [line.split('"')[1].split()[1] for line in
                        log.read_text().splitlines()[before:] if "/r.zarr/c/" in line]

            wait_for(lambda: len(asked_so_far()) >= 9, 20)  # the sizes asked ahead arrive
            ahead = asked_so_far()
            sizes = {name: os.stat(folder / name).st_size for name in names}  # as ls -l does
            asked = [line.split('"')[1].split()[1]
                     for line in log.read_text().splitlines()[before:] if "/r.zarr/c/" in line]
    assert size == len((tmp_path / "www" / "r.zarr" / "c" / "0" / "0").read_bytes())
    assert [f"/r.zarr/c/0/{i}" for i in range(9)] == sorted(
        ahead, key=lambda key: int(key.rsplit("/", 1)[1])), ahead
    assert len(asked) == len(set(asked)) == 24, asked  # each file's size asked once
    stored = {i: len((tmp_path / "www" / "r.zarr" / "c" / "0" / str(i)).read_bytes())
              for i in range(24)}
    assert sorted(sizes.values()) == sorted(stored.values())


def test_copying_chunk_files_through_a_cache_fetches_ahead_cold_and_asks_nothing_warm(tmp_path):
    """The next chunk files are fetched ahead under ``--cache-dir`` too, for the files whose
    bytes are not in the cache: a cold copy GETs each file once, a warm one asks nothing."""
    data = np.random.default_rng(7).integers(0, 60000, (64, 24 * 64)).astype("u2")
    zarr.create_array(tmp_path / "www" / "r.zarr", data=data, chunks=(64, 64))
    log = tmp_path / "nginx" / "access.log"
    args = ("--read-only", "--cache-dir", str(tmp_path / "cache"), "--metadata-ttl", "600")
    asked, ahead = [], []
    with nginx(tmp_path / "www", tmp_path / "nginx") as url:
        for mount in ("cold", "warm"):
            with mounted(f"{url}/r.zarr", tmp_path / mount, *args) as mnt:
                folder = next(Path(d) for d, _, files in os.walk(mnt) if len(files) == 24)
                before = log.read_text().count("\n")

                def gets(since: int = before) -> int:
                    return sum('"GET ' in line for line in log.read_text().splitlines()[since:]
                               if "/r.zarr/c/" in line)

                first = sorted(os.listdir(folder), key=int)[0]
                (folder / first).read_bytes()  # read to its end: the next files come ahead
                if mount == "cold":
                    wait_for(lambda: gets() >= 1 + 8, 20)
                ahead.append(gets())
                subprocess.run(["cp", "-r", str(folder), str(tmp_path / f"copy-{mount}")],
                               check=True, timeout=60)
            # Read once the daemon has exited: every request it sent is in the log.
            asked.append([line.split('"')[1] for line in
                          log.read_text().splitlines()[before:] if "/r.zarr/c/" in line])
    gets = [request for request in asked[0] if request.startswith("GET ")]
    assert ahead[0] == 1 + 8, asked[0]  # the file read, and the 8 after it, ahead
    assert len(gets) == len(set(gets)) == 24, asked[0]
    assert asked[1] == [], asked[1]
    for mount in ("cold", "warm"):
        copied = sorted(p.read_bytes() for p in (tmp_path / f"copy-{mount}").iterdir())
        stored = sorted((tmp_path / "www" / "r.zarr" / "c" / "0" / str(i)).read_bytes()
                        for i in range(24))
        assert copied == stored, mount


def _threads_named(mountpoint: Path, prefix: str) -> int:
    """Threads of the daemon serving ``mountpoint`` whose name starts with ``prefix``."""
    pid = subprocess.run(["pgrep", "-f", f"zarrfuse.* {mountpoint}"], capture_output=True,
                         text=True, check=True).stdout.split()[0]
    tasks = Path(f"/proc/{pid}/task")
    return sum((task / "comm").read_text().startswith(prefix) for task in tasks.iterdir())


def test_a_whole_image_sends_its_gets_at_once_with_no_thread_per_request(tmp_path):
    """Point 6: the chunks of a whole image go out as requests on the store request loop,
    one GET each and no HEAD, and the daemon starts no pool of fetch threads for them."""
    data = np.random.default_rng(11).integers(0, 60000, (512, 512)).astype("u2")
    zarr.create_array(tmp_path / "www" / "s.zarr", data=data, chunks=(64, 64))
    assert _whole_image_requests(tmp_path, data) == (0, 64, 0)  # each chunk once
