"""zarrfuse against ``rclone mount`` and ``s3fs`` on one moto bucket (a root group), each
pass a fresh read-only mount of the whole bucket: (1) every chunk file of ``seq`` (64 of
4 MiB; ``--quick``: 8) read one after another in 1 MiB reads, MB/s; (2) ``ls -lR`` of
``ls`` (10,000 one-byte chunks; ``--quick``: 1000); (3) the first 64 KiB of each of 200
shards of 8 MiB (``--quick``: 20). Baseline rclone (``--use-server-modtime``). Floors:
(1) >= 1.0x rclone's pace, (2) <= 1.0x its time. Also the requests and bytes the server
saw in the last pass of each (moto copies a whole object to answer a ranged GET, and spends
milliseconds of CPU a request: read the ratios and counts, not the seconds)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr

from bench.harness import MB, Context, MiB, Row, at_least, at_most, run, seconds
from bench.remote import rclone_s3, requests_text, s3_bucket, s3fs

ISSUE = "s3"
BUCKET = "zarrfuse-bench"
HEADS = """
import os, sys, time
paths, total = sys.stdin.read().split("\\0")[:-1], 0
start = time.perf_counter()
for path in paths:
    fd = os.open(path, os.O_RDONLY)
    total += len(os.read(fd, 64 << 10))
    os.close(fd)
print(total, time.perf_counter() - start)
"""


def measure(ctx: Context) -> list[Row]:
    import obstore  # noqa: PLC0415  (writes the bucket's objects)

    import zarrfuse  # noqa: PLC0415  (the same)
    from bench.scenarios.disk_cache import READ_ALL  # noqa: PLC0415  (the same reader)
    from zarrfuse.api.arrays import open_store_path  # noqa: PLC0415  (zarrfuse's URL opener)

    seq, shape, shards = ctx.pick(64, 8), ctx.pick((100, 100), (20, 50)), ctx.pick(200, 20)
    size, shard = 4 * MiB, 8 * MiB
    with s3_bucket(BUCKET) as server:
        options, url = {"endpoint_url": server.url}, f"s3://{BUCKET}"
        root = zarr.core.sync.sync(open_store_path(url, mode="a", storage_options=options))
        zarr.create_group(root)
        store = root.store.store
        zarrfuse.create_array(f"{url}/seq", shape=(seq, size), chunks=(1, size), dtype="u1",
                              compressors=None, storage_options=options)
        zarrfuse.create_array(f"{url}/ls", shape=shape, chunks=(1, 1), dtype="u1",
                              compressors=None, storage_options=options)
        sharded = zarrfuse.create_array(f"{url}/shards", shape=(shards, shard), dtype="u1",
                                        shards=(1, shard), chunks=(1, shard // 64),
                                        compressors=None, storage_options=options)
        rng = np.random.default_rng(1)
        sharded[0] = np.frombuffer(rng.bytes(shard), dtype="u1")
        blobs = [rng.bytes(size) for _ in range(4)]
        first = bytes(obstore.get(store, "shards/c/0/0").bytes())
        items = [(f"seq/c/{i}/0", blobs[i % 4]) for i in range(seq)]
        items += [(f"ls/c/{r}/{c}", bytes([(r + c) % 255 + 1]))
                  for r in range(shape[0]) for c in range(shape[1])]
        items += [(f"shards/c/{i}/0", first) for i in range(1, shards)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda kv: obstore.put(store, kv[0], kv[1], use_multipart=False),
                          items))
        asked: dict[str, tuple[Counter[str], int]] = {}

        def one(tool: str, what: str) -> float:
            where = ctx.work / f"{tool}-{time.monotonic_ns()}"
            if tool == "zarrfuse":
                m = ctx.mount(url, where, "--read-only", f"--storage-option=endpoint_url="
                              f"{server.url}")
            elif tool == "rclone":
                argv, env = rclone_s3(BUCKET, server.url, where)
                m = ctx.foreground(argv, where, env)
            else:
                m = ctx.foreground(s3fs(BUCKET, server.url, where), where)
            try:
                if what == "ls":
                    server.reset()
                    took = seconds(lambda: run(["ls", "-lR", m.where / "ls"], 600.0,
                                               stdout=subprocess.DEVNULL))
                else:
                    found = run(["find", m.where / what, "-type", "f", "-not", "-name",
                                 "zarr.json", "-print0"], stdout=subprocess.PIPE).stdout
                    paths = sorted(p for p in found.decode().split("\0") if p)
                    server.reset()
                    out = run([sys.executable, "-c", READ_ALL if what == "seq" else HEADS],
                              600.0, input="".join(p + "\0" for p in paths),
                              stdout=subprocess.PIPE, text=True).stdout.split()
                    want = seq * size if what == "seq" else shards * 64 * 1024
                    if int(out[0]) != want:
                        raise RuntimeError(f"{tool}: read {out[0]} bytes of {want}")
                    took = float(out[1])
                asked[f"{tool} {what}"] = server.snapshot()
                return seq * size / took / MB if what == "seq" else took
            finally:
                ctx.unmount(m)

        got = ctx.interleave({f"{tool} {what}": lambda t=tool, w=what: one(t, w)
                              for what in ("seq", "ls", "shards")
                              for tool in ("zarrfuse", "rclone", "s3fs")})
    rows = []
    labels = {"seq": (f"sequential read of {seq} chunk files of 4 MiB", "MB/s", at_least(1.0)),
              "ls": (f"ls -lR of {shape[0] * shape[1]:,} chunk files", "s", at_most(1.0)),
              "shards": (f"first 64 KiB of {shards} shards of 8 MiB", "s", None)}
    for what, (label, unit, floor) in labels.items():
        counts = "; ".join(f"{tool} {requests_text(asked.get(f'{tool} {what}', (Counter(), 0))[0])}"
                           f", {asked.get(f'{tool} {what}', (Counter(), 0))[1] / MiB:.1f} MiB"
                           for tool in ("zarrfuse", "rclone", "s3fs"))
        rows.append(Row(f"{label} (requests and bytes sent, last pass: {counts})", unit,
                        got[f"zarrfuse {what}"], ("rclone", got[f"rclone {what}"]), floor=floor))
        rows.append(Row(label, unit, got[f"zarrfuse {what}"], ("s3fs", got[f"s3fs {what}"])))
    return rows
