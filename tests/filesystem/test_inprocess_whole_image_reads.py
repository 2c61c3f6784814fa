"""How a whole image's tiles are decoded for a reader going through the file, in process
(``tests/inprocess.py``): the kernel sends a reader's next requests two at a time, and the
tiles after them are decoded ahead all the same; on a remote store the tiles ahead are asked
for beside the reader's first ones; the bytes are the array's."""

from __future__ import annotations

import io
import os
import threading
import time

import numpy as np
import pytest
import tifffile
import trio
import zarr

from tests.http_servers import MisbehavingServer
from tests.inprocess import InProcess, in_process

SIDE = (4096, 2048)  # 16 MiB of uint16: four read-ahead windows of 4 MiB
CHUNK = (256, 256)  # a tile per chunk, 128 KiB each
STEP = 1 << 20  # the kernel's request size on a mount (read_ahead_kb 1024)


def _image(path):
    data = np.random.default_rng(3).integers(0, 60000, SIDE).astype("u2")
    zarr.create_array(path, data=data, chunks=CHUNK, compressors=None)
    return data


def _two_at_once(fs: InProcess, fh: int, offsets: list[int]) -> None:
    """Requests of STEP bytes at ``offsets``, all in flight together, as the kernel sends
    a reader's read-ahead."""

    async def both() -> None:
        async with trio.open_nursery() as nursery:
            for offset in offsets:
                nursery.start_soon(fs.ops.read, fh, offset, STEP)

    trio.from_thread.run(both, trio_token=fs._token)


def _decoded_past(fs: InProcess, count: int, timeout: float = 20) -> int:
    """The decoded-chunk count once it is past ``count``, which decoding ahead must bring
    it to (a poll with a deadline, not a pause to let things settle); fails at the
    deadline with the count it stayed at."""
    deadline = time.monotonic() + timeout
    while (decoded := fs.ops.counters.decoded["chunks"]) <= count:
        assert time.monotonic() < deadline, f"decoding ahead stopped at {decoded} chunks"
        time.sleep(0.01)
    return decoded


def test_requests_two_at_a_time_from_the_start_decode_the_next_tiles_ahead(tmp_path):
    data = _image(tmp_path / "a")
    with in_process(str(tmp_path / "a"), format="ome-tiff", read_only=True) as fs:
        fh = fs.open("a.ome.tif", os.O_RDONLY)
        _two_at_once(fs, fh, [0, STEP])  # the header, and the gap before the tiles (2 MiB)
        _two_at_once(fs, fh, [2 * STEP, 3 * STEP])  # the first tiles, then the next MiB
        under_the_two = 2 * STEP // (CHUNK[0] * CHUNK[1] * 2)  # at most 16 chunks
        _decoded_past(fs, under_the_two + 8)  # tiles after them: decoded ahead
        fs.close(fh)
        np.testing.assert_array_equal(tifffile.imread(io.BytesIO(fs.read("a.ome.tif"))), data)


@pytest.mark.expect_log(r"did not answer within 2 s")  # the stalled chunk's read: EIO
def test_on_a_web_server_the_first_tiles_read_ahead_beside_their_own_requests(tmp_path):
    """Read-ahead costs round trips there, not cores: the windows after a reader's first
    tiles are asked for while its own are on their way (the first chunk never answers
    here), not after them (pace-azure: two round trips before the bulk of a whole image)."""
    _image(tmp_path / "a")
    with MisbehavingServer(tmp_path) as server:
        server.modes["a/c/0/0"] = "stall"
        with in_process(f"{server.url}/a", format="ome-tiff", read_only=True,
                        store_timeout=2.0) as fs:
            fh = fs.open("a.ome.tif", os.O_RDONLY)
            _two_at_once(fs, fh, [0, STEP])  # the header, and the gap before the tiles
            failed: list[BaseException] = []

            def first_tiles() -> None:
                try:
                    _two_at_once(fs, fh, [2 * STEP])  # row 0 of chunks: c/0/0 stalls
                except BaseException as e:  # noqa: BLE001  (an ExceptionGroup of the EIO)
                    failed.append(e)

            reader = threading.Thread(target=first_tiles)
            reader.start()
            deadline = time.monotonic() + 10  # < LIAR_SECONDS: fails, never hangs
            while not any(key.startswith("a/c/") and not key.startswith("a/c/0/")
                          for key in list(server.requests)):
                assert reader.is_alive() and time.monotonic() < deadline, (
                    f"nothing past the reader's own row asked: {sorted(server.requests)}")
                time.sleep(0.01)
            reader.join(20)
            assert not reader.is_alive()
            fs.close(fh)
    assert failed, "the stalled chunk's read ended without an error"
