"""Issue 34's mapped-files load at full size (``tests/torture.py``, which the torture tier
runs for a few seconds): 32 readers, 8 private and 4 shared read mappers, 2 ``numpy.memmap``
r+ and 2 plain-``mmap`` read-write writers and 2 ``cp``-like O_TRUNC writers on 4 chunk
files of one writable mount for 120 s (``--quick``: 5 s), as processes and as threads; then
fsx-style random I/O with a shared mapping (``tests/fsx.py``), 3 runs of 10,000 operations
(``--quick``: 1 of 1000). Floor: no wrong read, error, death (SIGBUS) or torn chunk. Also
operations and the daemon's RSS peak."""

from __future__ import annotations

from bench.harness import Context, Row, at_most, proc_field

ISSUE = "34"
WORKERS = {"reader": 32, "private_mapper": 8, "shared_mapper": 4, "rw_mapper": 2,
           "rw_mmap": 2, "cp_writer": 2}


def measure(ctx: Context) -> list[Row]:
    from tests.fsx import run_fsx  # noqa: PLC0415  (the torture tier's loads, with the tests)
    from tests.torture import make_array, run_load, stored_values  # noqa: PLC0415  (the same)

    secs, ops, seeds = ctx.pick(120.0, 5.0), ctx.pick(10_000, 1000), ctx.pick(3, 1)
    rows = []
    for threads in (False, True):
        run = "threads" if threads else "processes"
        store = ctx.work / f"{run}.zarr"
        names = make_array(store, 4)
        m = ctx.mount(store, ctx.work / f"{run}.mnt")
        try:
            result = run_load(m.where, names, secs, WORKERS, threads=threads)
            peak = proc_field(m.pid, "VmHWM") / 1024
        finally:
            ctx.unmount(m)
        bad = {"wrong reads": result.total("wrong"), "errors": sum(result.errors().values()),
               "deaths": len(result.deaths), "torn chunks": stored_values(store, names).count(
                   False)}
        rows.append(Row(f"{secs:g} s of load as {run}: operations (RSS peak {peak:.0f} MiB)",
                        "ops", [result.total("ops")]))
        rows += [Row(f"{secs:g} s of load as {run}: {k}", "", [v], floor=at_most(0, True))
                 for k, v in bad.items()]
    for seed in range(1, seeds + 1):
        store = ctx.work / f"fsx{seed}.zarr"
        names = make_array(store, chunks=1)
        m = ctx.mount(store, ctx.work / f"fsx{seed}.mnt")
        try:
            counts = run_fsx(m.where / names[0], (store / "c" / "0").read_bytes, ops, seed)
        finally:
            ctx.unmount(m)
        rows += [Row(f"fsx seed {seed}, {ops} operations: {k}", "", [counts[k]],
                     floor=at_most(0, True)) for k in ("wrong", "errors")]
    return rows
