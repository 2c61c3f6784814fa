"""Arrays on a plain web server (issue 24 point 1): nginx with its defaults refuses to list a
directory (403), and every view must read exact without a listing: what exists is learnt key
by key (HEAD, 404 = absent), absent chunks render as the fill value, listings show the
grid's positions, group members come from consolidated metadata, times from Last-Modified.
A server that misbehaves gives EIO with one log line, and nothing wrong is cached."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.http_servers import MisbehavingServer, nginx
from tests.mounting import ZARRFUSE, MountClock, mounted, run_with_timeout
from tests.picture_paths import tile_path
from zarrfuse.extensions.chunk_keys import FanoutChunkKeyEncoding

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(240)]

SHAPE, CHUNKS = (192, 256), (64, 64)
FANOUT = FanoutChunkKeyEncoding(1000)


def _file(mnt: Path, coords: tuple[int, ...], suffix: str) -> Path:
    """The file of chunk ``coords`` in a fanout view (max_children 1000, the default;
    rendered views leave out the grid's dimensions of extent 1); a 2-D TIFF is named by
    its position."""
    if suffix == ".tiff" and len(coords) == 2:
        return mnt / tile_path(*coords, "tiff")
    return mnt / (FANOUT.encode_chunk_key(coords) + suffix)


def _data(dtype: str = "u2") -> np.ndarray:
    return (np.arange(SHAPE[0] * SHAPE[1]) % 6007).astype(dtype).reshape(SHAPE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    """A web root holding arrays written by zarr-python: v3 with missing chunks, v2, sharded,
    and a group with consolidated metadata (v3 and v2); served by nginx."""
    root = tmp_path_factory.mktemp("www")
    data = _data()
    sparse = zarr.create_array(root / "sparse.zarr", shape=SHAPE, chunks=CHUNKS, dtype="u2",
                               fill_value=7)
    sparse[:64] = data[:64]  # rows of chunks 1 and 2 are never written: absent
    zarr.create_array(root / "v2.zarr", data=data, chunks=CHUNKS, zarr_format=2)
    zarr.create_array(root / "sharded.zarr", data=data, chunks=(32, 32), shards=CHUNKS)
    for fmt in (3, 2):
        group = zarr.open_group(root / f"g{fmt}.zarr", mode="w", zarr_format=fmt)
        group.create_array("top", data=data, chunks=CHUNKS)
        group.create_group("nested").create_array("deep", data=data[:64], chunks=CHUNKS)
        zarr.consolidate_metadata(root / f"g{fmt}.zarr")
    zarr.open_group(root / "plain.zarr", mode="w").create_array("a", data=data, chunks=CHUNKS)
    with nginx(root, tmp_path_factory.mktemp("nginx")) as url:
        yield root, url


def _expected(root: Path, name: str) -> np.ndarray:
    return zarr.open_array(root / name, mode="r")[...]


def test_nginx_refuses_listings(site):
    _, url = site
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/sparse.zarr/c/0/", timeout=10)
    assert refused.value.code == 403


@pytest.mark.parametrize("name", ["sparse.zarr", "v2.zarr", "sharded.zarr"])
def test_raw_view_reads_exact_and_lists_what_exists(site, tmp_path, name):
    root, url = site
    with mounted(f"{url}/{name}", tmp_path / "mnt", "--read-only") as mnt:
        found = run_with_timeout(["find", str(mnt), "-type", "f"]).stdout.split()
        chunk_files = sorted(p for p in found if not p.rsplit("/", 1)[-1].startswith((".z",
                                                                                        "zarr.")))
        stored = sorted(
            str(p.relative_to(root / name)) for p in (root / name).rglob("*")
            if p.is_file() and not p.name.startswith((".z", "zarr."))
        )
        assert len(chunk_files) == len(stored) > 0  # absent chunks are not shown
        for path in chunk_files:
            stored_bytes = None
            for candidate in stored:  # names differ by view encoding: compare contents
                if (root / name / candidate).read_bytes() == Path(path).read_bytes():
                    stored_bytes = candidate
            assert stored_bytes is not None, path


def test_rendered_views_fill_absent_chunks(site, tmp_path):
    root, url = site
    expected = _expected(root, "sparse.zarr")
    with mounted(f"{url}/sparse.zarr", tmp_path / "mnt", "--format", "tiff") as mnt:
        assert len(list(mnt.rglob("*.tiff"))) == 12  # every position of the 3 x 4 grid
        got = np.block([[tifffile.imread(_file(mnt, (r, c), ".tiff")) for c in range(4)]
                        for r in range(3)])
        np.testing.assert_array_equal(got, expected)
        assert (got[64:] == 7).all()
    with mounted(f"{url}/sparse.zarr", tmp_path / "img", "--format", "ome-tiff") as mnt:
        np.testing.assert_array_equal(tifffile.imread(mnt / "sparse.ome.tif"), expected)


def test_times_come_from_last_modified(site, tmp_path):
    root, url = site
    with mounted(f"{url}/v2.zarr", tmp_path / "mnt", "--read-only") as mnt:
        past = time.time() - 3600 * 24 * 400
        os.utime(root / "v2.zarr" / "1.2", (past, past))
        chunk = _file(mnt, (1, 2), "")
        assert int(os.stat(chunk).st_mtime) == int(past)  # Last-Modified has seconds


@pytest.mark.parametrize("fmt", [3, 2])
def test_group_members_come_from_consolidated_metadata(site, tmp_path, fmt):
    _root, url = site
    with mounted(f"{url}/g{fmt}.zarr", tmp_path / "mnt", "--format", "npy") as mnt:
        assert sorted(p.name for p in mnt.iterdir() if p.is_dir()) == ["nested", "top"]
        deep = mnt / "nested" / "deep"
        assert len(list(deep.rglob("*.npy"))) == 4
        np.testing.assert_array_equal(np.load(_file(deep, (1,), ".npy")), _data()[:64, 64:128])


def test_a_group_without_consolidated_metadata_says_why_it_is_empty(site, tmp_path):
    _, url = site
    log = tmp_path / "mount.log"
    with mounted(f"{url}/plain.zarr", tmp_path / "mnt", "--read-only",
                 "--log-file", str(log)) as mnt:
        assert [p.name for p in mnt.iterdir()] == ["zarr.json"]
        assert "has no consolidated metadata" in log.read_text()


# --- a server that misbehaves ----------------------------------------------------------------


@pytest.fixture
def bad_server(tmp_path):
    root = tmp_path / "www"
    zarr.create_array(root / "a.zarr", data=_data(), chunks=CHUNKS, compressors=None)
    with MisbehavingServer(root) as server:
        yield root, server


@pytest.mark.parametrize("mode", ["500", "loop", "truncate", "long-length"])
def test_a_misbehaving_server_gives_eio_then_recovers(bad_server, tmp_path, mode, monkeypatch):
    clock = MountClock(monkeypatch, tmp_path)
    root, server = bad_server
    log = tmp_path / "mount.log"
    key = "a.zarr/c/1/2"
    good = (root / key).read_bytes()
    with mounted(f"{server.url}/a.zarr", tmp_path / "mnt", "--read-only", "--metadata-ttl",
                 "0.5", "--store-timeout", "5", "--log-file", str(log)) as mnt:
        path = _file(mnt, (1, 2), "")
        server.modes[key] = mode
        before = log.read_text().count("\n")
        result = run_with_timeout(["cat", str(path)], 10, check=False)  # fails past 10 s
        assert result.returncode != 0 and "Input/output error" in result.stderr, result
        lines = log.read_text().splitlines()[before:]
        assert "Traceback" not in "\n".join(lines)
        said = [line for line in lines if " ERROR " in line or " WARNING " in line]
        # One line per failed request: the kernel may send the read twice (its read-ahead,
        # then cat's own read) before it gives up.
        assert 1 <= len(said) <= 2 and len(said) == len(lines), lines
        assert all("c/1/2" in line for line in said), said
        server.modes.pop(key)
        clock.ahead(1)  # past the listing time
        assert Path(path).read_bytes() == good


@pytest.mark.parametrize("mode", ["500", "loop"])
def test_a_server_error_is_never_rendered_as_the_fill_value(bad_server, tmp_path, mode):
    """A chunk the server fails to answer for is not an absent chunk: EIO, not zeros."""
    _root, server = bad_server
    server.modes["a.zarr/c/1/2"] = mode
    with mounted(f"{server.url}/a.zarr", tmp_path / "mnt", "--format", "npy",
                 "--store-timeout", "5") as mnt:
        result = run_with_timeout(
            ["python3", "-c", f"open({str(_file(mnt, (1, 2), '.npy'))!r}, 'rb').read()"], 30,
            check=False)
        assert result.returncode != 0 and "Input/output error" in result.stderr, result
        np.testing.assert_array_equal(np.load(_file(mnt, (0, 0), ".npy")), _data()[:64, :64])


def test_a_whole_image_asks_no_head_and_absent_chunks_are_the_404s(tmp_path):
    """Issue 32: on a web server the whole image sent a HEAD before every GET (256 HEADs,
    then 256 GETs). A chunk of one part is read by one GET, whose 404 is the absent chunk
    (the fill value): no HEAD for any chunk, one GET each, the picture exact."""
    root = tmp_path / "www"
    data = _data()
    sparse = zarr.create_array(root / "s.zarr", shape=SHAPE, chunks=CHUNKS, dtype="u2",
                               fill_value=7)
    sparse[:64] = data[:64]  # chunk rows 1 and 2 are absent
    expected = data.copy()
    expected[64:] = 7
    run = tmp_path / "nginx"
    with nginx(root, run) as url:
        # Counted from before the mount: what it fetches while it comes up counts too.
        before = (run / "access.log").read_text().count("\n")
        with mounted(f"{url}/s.zarr", tmp_path / "mnt", "--read-only", "--format",
                     "ome-tiff") as mnt:
            np.testing.assert_array_equal(tifffile.imread(mnt / "s.ome.tif"), expected)
            lines = (run / "access.log").read_text().splitlines()[before:]
    chunk_requests = [line for line in lines if "/s.zarr/c/" in line]
    assert not [line for line in chunk_requests if '"HEAD ' in line], chunk_requests
    gets = [line for line in chunk_requests if '"GET ' in line]
    assert len(gets) == 12, chunk_requests  # one per chunk, absent ones included


def test_mounting_waits_for_zarr_json_at_most_the_store_timeout(bad_server, tmp_path):
    """Issue 52: a ``zarr.json`` that never comes waited the HTTP client's own 30 s and its
    retries (33.5 s at ``--store-timeout 5``); the mount now gives up at the timeout, and
    says so."""
    _root, server = bad_server
    server.modes["a.zarr/zarr.json"] = "stall"
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout(
        [*ZARRFUSE, "mount", f"{server.url}/a.zarr", tmp_path / "mnt", "--read-only",
         "--store-timeout", "2"], 90, check=False)
    assert result.returncode != 0, result
    assert "no answer within 2 s (--store-timeout)" in result.stderr, result.stderr


def test_a_redirect_to_another_host_is_refused_unless_allowed(bad_server, tmp_path):
    """Issue 52: a chunk redirected to another host (``localhost`` for ``127.0.0.1``) was
    fetched from there. Refused now: EIO and one WARNING naming it; ``--allow-redirects``
    follows it."""
    root, server = bad_server
    key = "a.zarr/c/1/2"
    server.modes[key] = "redirect-away"
    log = tmp_path / "mount.log"
    with mounted(f"{server.url}/a.zarr", tmp_path / "mnt", "--read-only", "--log-file",
                 str(log)) as mnt:
        result = run_with_timeout(["cp", _file(mnt, (1, 2), ""), "/dev/null"], 30,
                                  check=False)
        assert result.returncode != 0 and "Input/output error" in result.stderr, result
    said = [line for line in log.read_text().splitlines() if " WARNING " in line]
    assert len(said) == 1 and "redirected to another host" in said[0], said
    with mounted(f"{server.url}/a.zarr", tmp_path / "mnt2", "--read-only",
                 "--allow-redirects") as mnt:
        assert _file(mnt, (1, 2), "").read_bytes() == (root / key).read_bytes()
