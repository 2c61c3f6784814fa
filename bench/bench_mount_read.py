#!/usr/bin/env python3
"""Read-side benchmark of a zarrfuse mount against bindfs and the store read directly.

One run builds three stores in a scratch directory, mounts each through ``bindfs`` and through
``zarrfuse --read-only``, and measures, for the same data on every contender:

1. sequential read of every chunk file (about 1 GiB, files of 1-16 MiB), with the mount's page
   cache dropped before each file is read (``posix_fadvise(DONTNEED)``, checked with
   ``mincore`` and the daemon's ``rchar``) and the store's page cache warm;
2. the same read again with every cache warm;
3. ``ls -lR`` and ``find`` over an array of 100,000 stored chunks, on a fresh mount each time
   (cold kernel cache) and on the store directory (warm);
4. the first 64 KiB of each of 200 shards of 16 MiB: bytes the daemon read from the store
   (``/proc/PID/io`` ``rchar``) against bytes delivered.

Every figure is printed beside its baseline measured in the same run, with the ratio and
whether the product's floor is met. Run with the project's virtualenv, as root (FUSE):

    .venv/bin/python bench/bench_mount_read.py            # default sizes, a few minutes
    .venv/bin/python bench/bench_mount_read.py --quick    # small smoke run

The exit status is 1 if a floor is missed. Every timed step also logs the "outside load" (CPU
used by other processes): FUSE round-trip latency on this VM depends on it (see OutsideLoad).

Nothing here may hang: external commands run with timeouts, every mount is unmounted in a
``finally``, and a watchdog aborts the FUSE connections (``/sys/fs/fuse/connections/N/abort``)
if a phase overruns, which turns a stuck read into an error instead of a hang.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr

import zarrfuse

MiB = 1 << 20
KiB = 1 << 10
MB = 1e6
FANOUT_WIDTH = 3  # the mount's default view: fanout with max_children 1000
CMD_TIMEOUT = 30.0
LIST_TIMEOUT = 300.0  # one `ls -lR` of 100k entries through a slow FUSE mount
MOUNT_TIMEOUT = 90.0

HERE = Path(__file__).resolve().parent
DEFAULT_ZARRFUSE = Path(sys.executable).parent / "zarrfuse"
if not DEFAULT_ZARRFUSE.exists():
    DEFAULT_ZARRFUSE = HERE.parent / ".venv" / "bin" / "zarrfuse"
C_ENV = {**os.environ, "LC_ALL": "C"}  # same collation (and speed) for ls in every run


# --- sizes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    # sequential data: (array name, chunk shape, grid shape); uint8, one file per chunk
    seq_arrays: tuple[tuple[str, tuple[int, int], tuple[int, int]], ...]
    ls_shape: tuple[int, int]  # chunks (1, 1): one 1-byte file per element
    shards: int
    shard_shape: tuple[int, int]  # uint8 shard; inner chunks are shard_shape / 8
    head: int  # bytes read from the start of each shard


DEFAULT_SIZES = Sizes(
    seq_arrays=(
        ("s01", (1024, 1024), (16, 6)),  # 1.00 MiB x 96
        ("s02", (1536, 1536), (12, 4)),  # 2.25 MiB x 48
        ("s04", (2000, 2000), (10, 4)),  # 3.81 MiB x 40
        ("s06", (2500, 2500), (7, 4)),  # 5.96 MiB x 28
        ("s09", (3000, 3000), (6, 4)),  # 8.58 MiB x 24
        ("s16", (4096, 4096), (19, 1)),  # 16.00 MiB x 19
    ),
    ls_shape=(400, 250),
    shards=200,
    shard_shape=(4096, 4096),
    head=64 * KiB,
)

QUICK_SIZES = Sizes(
    seq_arrays=(
        ("s01", (1024, 1024), (4, 4)),
        ("s03", (1800, 1800), (3, 2)),
        ("s16", (4096, 4096), (2, 1)),
    ),
    ls_shape=(100, 100),
    shards=20,
    shard_shape=(1024, 1024),
    head=64 * KiB,
)


# --- small helpers -----------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: Sequence[str], timeout: float = CMD_TIMEOUT, *, check: bool = False,
        **kw) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, timeout=timeout, check=check, ...)``, timed to the child's exit.

    subprocess's own timeout waits by polling the child, at 50 ms intervals once it has run
    63 ms: a command timed around it took 64, 115, 165 or 215 ms whatever it really took (a
    warm ``cp -r`` of 70 ms read as 115). Here the parent blocks in ``waitpid``, and a timer
    kills the child if it overruns."""
    killed = threading.Event()

    def overrun() -> None:
        killed.set()
        proc.kill()

    with subprocess.Popen(list(cmd), env=C_ENV, **kw) as proc:
        timer = threading.Timer(timeout, overrun)
        timer.start()
        try:
            out, err = proc.communicate()
        finally:
            timer.cancel()
    if killed.is_set() and proc.returncode == -signal.SIGKILL:  # not one that ended in time
        raise subprocess.TimeoutExpired(proc.args, timeout, out, err)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def timed(cmd: Sequence[str], timeout: float = LIST_TIMEOUT) -> float:
    """Seconds ``cmd`` takes with its output thrown away; raises if it fails or overruns."""
    t0 = time.perf_counter()
    run(cmd, timeout=timeout, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def mountpoints() -> set[str]:
    """Mountpoints from /proc/self/mountinfo (never blocks, unlike a stat of a stuck mount)."""
    out = set()
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            field5 = line.split()[4]
            out.add(field5.decode().encode().decode("unicode_escape"))
    return out


def rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError(f"no rchar for pid {pid}")


CLK = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    """CPU-seconds all CPUs spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK


def _pid_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


class OutsideLoad:
    """How busy the machine was with work other than ours while a measurement ran.

    Busy CPU time from /proc/stat minus our process, our children (ls, find) and the daemon
    under test, as a share of all CPUs over the wall time. Synchronous FUSE round trips are
    slow when the other vCPU is idle (waking it costs tens of microseconds in this VM) and fast
    when something keeps it busy: bindfs's ``ls -lR`` of 100k files took 16-18 s on an idle
    machine and 1.8-2.3 s with a CPU burner running (measured), so a busy machine can make a
    baseline look several times faster than it is. Kernel threads count as outside load.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.t0 = time.perf_counter()
        self.busy0 = _machine_busy()
        self.own0 = self._own()

    def _own(self) -> float:
        me = os.times()
        return me.user + me.system + me.children_user + me.children_system + _pid_cpu(self.pid)

    def stop(self) -> float:
        wall = time.perf_counter() - self.t0
        other = (_machine_busy() - self.busy0) - (self._own() - self.own0)
        return max(0.0, other) / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes(paths: Iterable[str]) -> int:
    """Bytes of these files in the page cache of the filesystem they are opened through
    (mincore on a read-only shared mapping: maps no page in, reads nothing)."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                continue
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            try:
                pages = -(-size // PAGE)
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(addr, size, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {path}")
                total += sum(b & 1 for b in bytes(vec)) * PAGE
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
    return total


def drop_page_cache(paths: Iterable[str]) -> None:
    """Drop these files' pages from the cache of the filesystem they are opened through.

    On a FUSE mount this drops the mount's pages only: the daemon's backing files (the store)
    are other inodes and keep theirs."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_files(paths: Sequence[str], buf: bytearray, drop: bool = False) -> tuple[int, float]:
    """Read every file in full with readinto() into one reused buffer: (bytes, seconds).

    Seconds count open, reads and close of each file. With ``drop`` each file's pages are
    first dropped from the cache of the filesystem it is read through (untimed, and checked
    with mincore). Dropping file by file, just before reading it, matters on this VM: free
    page reporting hands freed pages back to the host ~2 s after they are freed, and the next
    first touch of such a page faults on the host. Dropping a whole 1 GiB pass up front made
    cold passes 2-5x slower and erratic (for bindfs and zarrfuse alike), depending on how
    long the pass took; dropping just before reading recycles the pages freed a moment ago.
    """
    total = 0
    elapsed = 0.0
    for path in paths:
        if drop:
            drop_page_cache([path])
            if resident_bytes([path]):
                raise RuntimeError(f"{path}: still cached after posix_fadvise(DONTNEED)")
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
        elapsed += time.perf_counter() - t0
    return total, elapsed


def read_heads(paths: Sequence[str], head: int) -> int:
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            got = 0
            while got < head and (data := os.read(fd, head - got)):
                got += len(data)
            total += got
        finally:
            os.close(fd)
    return total


def sha_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while data := f.read(4 * MiB):
            h.update(data)
    return h.hexdigest()


def fanout(coord: int) -> str:
    """The mount's fanout path segment of one coordinate (max_children 1000)."""
    digits = str(coord)
    groups = -(-len(digits) // FANOUT_WIDTH)
    digits = digits.zfill(groups * FANOUT_WIDTH)
    return "/".join([str(groups - 1)] + [digits[i : i + FANOUT_WIDTH]
                                         for i in range(0, len(digits), FANOUT_WIDTH)])


def view_key(coords: Sequence[int]) -> str:
    return "c/" + "/".join(fanout(c) for c in coords)


def store_key(coords: Sequence[int]) -> str:
    return "c/" + "/".join(str(c) for c in coords)


# --- watchdog ------------------------------------------------------------------------------------


class Watchdog:
    """Aborts every FUSE connection we made if a phase overruns: a stuck read then fails
    with ENOTCONN instead of hanging the benchmark (and the finally that unmounts)."""

    def __init__(self) -> None:
        self.connections: set[int] = set()
        self._timer: threading.Timer | None = None
        self.fired: str | None = None

    def arm(self, seconds: float, label: str) -> None:
        self.disarm()
        self._timer = threading.Timer(seconds, self._fire, args=(label,))
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def abort(self, conn: int) -> None:
        try:
            with open(f"/sys/fs/fuse/connections/{conn}/abort", "w") as f:
                f.write("1")
        except OSError:
            pass

    def _fire(self, label: str) -> None:
        self.fired = label
        print(f"!! watchdog: phase {label!r} overran; aborting FUSE connections", flush=True)
        for conn in list(self.connections):
            self.abort(conn)


WATCHDOG = Watchdog()


# --- mounts --------------------------------------------------------------------------------------


def _stat_dev(path: str, timeout: float = 10.0) -> int:
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(os.stat(path).st_dev), daemon=True)
    t.start()
    t.join(timeout)
    if not result:
        raise RuntimeError(f"stat {path} did not answer in {timeout} s")
    return result[0]


class Mount:
    """A FUSE mount of ``source`` at ``mountpoint``; subclasses say how to start and stop it."""

    kind = "?"

    def __init__(self, source: Path, mountpoint: Path) -> None:
        self.source = str(source)
        self.mountpoint = str(mountpoint)
        self.pid: int | None = None
        self.dev: int | None = None
        os.makedirs(self.mountpoint, exist_ok=True)

    def __enter__(self) -> Mount:
        self.mount()
        return self

    def __exit__(self, *exc) -> None:
        self.unmount()

    @property
    def read_ahead_kb(self) -> int:
        assert self.dev is not None
        with open(f"/sys/class/bdi/{os.major(self.dev)}:{os.minor(self.dev)}/read_ahead_kb") as f:
            return int(f.read())

    def _live(self) -> None:
        self.dev = _stat_dev(self.mountpoint)
        WATCHDOG.connections.add(os.minor(self.dev))

    def mount(self) -> None:
        raise NotImplementedError

    def unmount(self) -> None:
        raise NotImplementedError

    def _force(self) -> None:
        if self.dev is not None:
            WATCHDOG.abort(os.minor(self.dev))
        if self.mountpoint in mountpoints():
            subprocess.run(["fusermount3", "-u", "-z", self.mountpoint], timeout=CMD_TIMEOUT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _wait_gone(self, pid: int | None, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while pid is not None and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.02)


class ZarrfuseMount(Mount):
    kind = "zarrfuse"
    executable = str(DEFAULT_ZARRFUSE)

    def mount(self) -> None:
        run([self.executable, "mount", self.source, self.mountpoint, "--read-only"],
            timeout=MOUNT_TIMEOUT, check=True)
        self._live()
        self.pid = self._find_daemon()

    def _find_daemon(self) -> int:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"--foreground" in args and os.fsencode(self.mountpoint) in args:
                return int(entry)
        raise RuntimeError(f"no zarrfuse daemon found for {self.mountpoint}")

    def unmount(self) -> None:
        if self.mountpoint not in mountpoints():
            return
        try:
            run([self.executable, "umount", self.mountpoint], timeout=CMD_TIMEOUT,
                check=True, stdout=subprocess.DEVNULL)
        except (subprocess.SubprocessError, OSError) as e:
            print(f"!! zarrfuse umount {self.mountpoint}: {e}; forcing", flush=True)
            self._force()
        self._wait_gone(self.pid)
        if self.dev is not None:
            WATCHDOG.connections.discard(os.minor(self.dev))


class BindfsMount(Mount):
    """bindfs in the foreground (default: single-threaded), so its pid is ours to read."""

    kind = "bindfs"

    def __init__(self, source: Path, mountpoint: Path) -> None:
        super().__init__(source, mountpoint)
        self.proc: subprocess.Popen | None = None

    def mount(self) -> None:
        self.proc = subprocess.Popen(
            ["bindfs", "-f", "--no-allow-other", self.source, self.mountpoint],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while self.mountpoint not in mountpoints():
            if self.proc.poll() is not None:
                raise RuntimeError(f"bindfs exited: {self.proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                raise RuntimeError("bindfs did not mount in time")
            time.sleep(0.01)
        self._live()
        self.pid = self.proc.pid

    def unmount(self) -> None:
        if self.proc is None:
            return
        if self.mountpoint in mountpoints():
            try:
                subprocess.run(["fusermount3", "-u", self.mountpoint], timeout=CMD_TIMEOUT,
                               check=True, stderr=subprocess.DEVNULL)
            except (subprocess.SubprocessError, OSError) as e:
                print(f"!! fusermount3 -u {self.mountpoint}: {e}; forcing", flush=True)
                self._force()
        try:
            self.proc.wait(timeout=CMD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=CMD_TIMEOUT)
        if self.dev is not None:
            WATCHDOG.connections.discard(os.minor(self.dev))
        self.proc = None


class Mounts:
    """Every mount made by the run, so the final ``finally`` can unmount what is left."""

    def __init__(self) -> None:
        self.live: list[Mount] = []

    def make(self, cls: type[Mount], source: Path, mountpoint: Path) -> Mount:
        m = cls(source, mountpoint)
        self.live.append(m)
        m.mount()
        return m

    def drop(self, m: Mount) -> None:
        m.unmount()
        if m in self.live:
            self.live.remove(m)

    def close(self) -> None:
        for m in reversed(self.live):
            try:
                m.unmount()
            # last-ditch cleanup: whatever one unmount raises, keep unmounting the others
            except Exception as e:  # noqa: BLE001  (see above: leave no mount behind)
                print(f"!! unmount {m.mountpoint}: {e}", flush=True)
        self.live.clear()


# --- data ----------------------------------------------------------------------------------------


@dataclass
class SeqData:
    root: Path
    keys: list[str]  # store keys of every chunk file, relative to root
    views: list[str]  # the same files' paths in the mount view
    sizes: list[int]

    @property
    def total(self) -> int:
        return sum(self.sizes)


def make_seq_data(root: Path, sizes: Sizes, rng: np.random.Generator) -> SeqData:
    """A group of uncompressed uint8 arrays, one per chunk size, written through zarr."""
    group = zarr.open_group(root, mode="w")
    keys, views, nbytes = [], [], []
    for name, chunks, grid in sizes.seq_arrays:
        shape = (chunks[0] * grid[0], chunks[1] * grid[1])
        arr = group.create_array(name, shape=shape, chunks=chunks, dtype="uint8",
                                 compressors=None, fill_value=0)
        for i in range(grid[0]):  # one row of chunks at a time: bounded memory
            rows = np.frombuffer(rng.bytes(chunks[0] * shape[1]), dtype="uint8")
            arr[i * chunks[0] : (i + 1) * chunks[0], :] = rows.reshape(chunks[0], shape[1])
            for j in range(grid[1]):
                keys.append(f"{name}/{store_key((i, j))}")
                views.append(f"{name}/{view_key((i, j))}")
                nbytes.append(chunks[0] * chunks[1])
    for key, n in zip(keys, nbytes, strict=True):
        got = os.path.getsize(root / key)
        if got != n:
            raise RuntimeError(f"{key}: {got} bytes stored, {n} expected (not uncompressed?)")
    return SeqData(root, keys, views, nbytes)


def make_ls_data(root: Path, shape: tuple[int, int]) -> int:
    """An array of 1-byte chunks; zarr.json by zarr, chunk files written directly (c/i/j)."""
    arr = zarr.create_array(root, shape=shape, chunks=(1, 1), dtype="uint8",
                            compressors=None, fill_value=0)
    for i in range(shape[0]):
        d = root / "c" / str(i)
        d.mkdir(parents=True)
        for j in range(shape[1]):
            fd = os.open(d / str(j), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, bytes([(i * shape[1] + j) % 255 + 1]))
            os.close(fd)
    check = arr[shape[0] - 1, :5]  # zarr reads the hand-written chunks back
    want = [((shape[0] - 1) * shape[1] + j) % 255 + 1 for j in range(5)]
    if list(check) != want:
        raise RuntimeError(f"hand-written chunks read back as {list(check)}, expected {want}")
    return shape[0] * shape[1]


def make_shard_data(root: Path, sizes: Sizes, rng: np.random.Generator) -> tuple[list[str], int]:
    """A sharded array with ``sizes.shards`` shards along axis 0: shard 0 written by zarr, the
    others hard links to it (same bytes under every key, no extra disk)."""
    s0, s1 = sizes.shard_shape
    arr = zarr.create_array(root, shape=(s0 * sizes.shards, s1), shards=(s0, s1),
                            chunks=(s0 // 8, s1 // 8), dtype="uint8", compressors=None,
                            fill_value=0)
    arr[0:s0, :] = np.frombuffer(rng.bytes(s0 * s1), dtype="uint8").reshape(s0, s1)
    first = root / store_key((0, 0))
    for i in range(1, sizes.shards):
        (root / "c" / str(i)).mkdir(parents=True)
        os.link(first, root / store_key((i, 0)))
    if not np.array_equal(arr[s0 * (sizes.shards - 1), :16], arr[0, :16]):
        raise RuntimeError("linked shard does not read back like shard 0")
    return [view_key((i, 0)) for i in range(sizes.shards)], os.path.getsize(first)


# --- results -------------------------------------------------------------------------------------


@dataclass
class Row:
    measure: str
    value: float
    baseline: float
    baseline_name: str
    unit: str
    floor: str  # text
    ok: bool | None  # None: information only
    fmt: str = "{:.1f}"
    caveat: str = ""

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)

    def add(self, *args, **kw) -> None:
        self.rows.append(Row(*args, **kw))

    def note(self, line: str) -> None:
        self.detail.append(line)
        print(line, flush=True)


BUSY = 0.10  # outside load above which a result is flagged: the baselines move with it


def result_text(ok: bool | None) -> str:
    return "info" if ok is None else ("PASS" if ok else "MISS")


def busy_caveat(outside: Sequence[float]) -> str:
    load = median(outside)
    return f" (machine busy: {load:.0%} outside load; rerun when idle)" if load > BUSY else ""


# --- the measurements ----------------------------------------------------------------------------


def bench_sequential(seq: SeqData, mounts: Mounts, mnt: Path, args, res: Results) -> None:
    direct = [str(seq.root / k) for k in seq.keys]
    total = seq.total
    log(f"[1+2] {len(direct)} files, {total / MiB:.0f} MiB; warming the store's page cache")
    buf = bytearray(args.bufsize)
    read_files(direct, buf)  # warm the store's page cache

    bf = mounts.make(BindfsMount, seq.root, mnt / "bindfs-seq")
    zf = mounts.make(ZarrfuseMount, seq.root, mnt / "zarrfuse-seq")
    paths = {
        "direct": direct,
        "bindfs": [os.path.join(bf.mountpoint, k) for k in seq.keys],
        "zarrfuse": [os.path.join(zf.mountpoint, v) for v in seq.views],
    }
    pids = {"bindfs": bf.pid, "zarrfuse": zf.pid}
    res.note(f"  read method: open(buffering=0).readinto() of a reused {args.bufsize // KiB} KiB "
             f"buffer, one file after another; time = sum over files of open+read+close")
    res.note(f"  mount bdi read_ahead_kb: bindfs {bf.read_ahead_kb}, zarrfuse {zf.read_ahead_kb}")

    # Same files, same bytes, in every view (untimed; before any timed pass).
    seen = {}
    for dirpath, _dirs, files in os.walk(zf.mountpoint):
        for name in files:
            p = os.path.join(dirpath, name)
            seen[os.path.relpath(p, zf.mountpoint)] = os.path.getsize(p)
    expect = dict(zip(seq.views, seq.sizes, strict=True))
    seen = {k: v for k, v in seen.items() if not k.endswith("zarr.json")}
    if seen != expect:
        raise RuntimeError(f"zarrfuse view differs: {len(seen)} files seen, {len(expect)} expected")
    sample = sorted({0, len(direct) // 2, len(direct) - 1})
    for i in sample:
        digests = {name: sha_of(p[i]) for name, p in paths.items()}
        if len(set(digests.values())) != 1:
            raise RuntimeError(f"file {seq.keys[i]} differs between contenders: {digests}")
    res.note(f"  checked: zarrfuse lists exactly the {len(expect)} chunk files with the store's "
             f"sizes; sampled files have identical sha256 in all three views")

    # One untimed cold pass per mount first: pages the VM has not touched lately fault on
    # the host when first written, which made first passes 2-5x slower (measured).
    for name in ("bindfs", "zarrfuse"):
        read_files(paths[name], buf, drop=True)
    outside: list[float] = []
    cold: dict[str, list[float]] = {k: [] for k in paths}
    fetched: dict[str, list[int]] = {"bindfs": [], "zarrfuse": []}
    store_resident = []
    for rnd in range(args.repeat):
        store_resident.append(resident_bytes(direct))
        for name, ps in paths.items():
            r0 = rchar(pids[name]) if name != "direct" else 0
            WATCHDOG.arm(args.phase_timeout, f"sequential {name}")
            load = OutsideLoad(pids.get(name))
            n, dt = read_files(ps, buf, drop=name != "direct")
            outside.append(load.stop())
            WATCHDOG.disarm()
            if n != total:
                raise RuntimeError(f"{name}: read {n} bytes, expected {total}")
            cold[name].append(n / dt / MB)
            extra = ""
            if name != "direct":
                fetched[name].append(rchar(pids[name]) - r0)
                extra = f"  (daemon read {fetched[name][-1] / MiB:.0f} MiB from the store)"
            log(f"    cold pass {rnd + 1} {name:9s} {n / dt / MB:8.0f} MB/s{extra}  "
                f"(outside load {outside[-1]:.0%})")
    for name in fetched:
        if min(fetched[name]) < total:
            raise RuntimeError(f"{name}: daemon read less than the data: cache was not dropped")
    res.note(f"  store page cache before each cold round: {min(store_resident) / MiB:.0f}-"
             f"{max(store_resident) / MiB:.0f} MiB of {total / MiB:.0f} MiB resident (mincore)")
    res.note(f"  mount cache cold: each file's mount pages dropped with posix_fadvise(DONTNEED) "
             f"just before it is read (drop untimed); verified per file by mincore (0 bytes "
             f"resident) and per pass by the daemon's rchar (bindfs >= "
             f"{min(fetched['bindfs']) / MiB:.0f} MiB, zarrfuse >= "
             f"{min(fetched['zarrfuse']) / MiB:.0f} MiB for {total / MiB:.0f} MiB of data); "
             f"one untimed cold pass per mount first")

    resident_zf = resident_bytes(paths["zarrfuse"])
    warm: dict[str, list[float]] = {k: [] for k in paths}
    warm_fetched: dict[str, list[int]] = {"bindfs": [], "zarrfuse": []}
    for rnd in range(args.repeat):
        for name, ps in paths.items():
            r0 = rchar(pids[name]) if name != "direct" else 0
            WATCHDOG.arm(args.phase_timeout, f"warm {name}")
            load = OutsideLoad(pids.get(name))
            n, dt = read_files(ps, buf)
            outside.append(load.stop())
            WATCHDOG.disarm()
            warm[name].append(n / dt / MB)
            if name != "direct":
                warm_fetched[name].append(rchar(pids[name]) - r0)
            log(f"    warm pass {rnd + 1} {name:9s} {n / dt / MB:8.0f} MB/s")
    res.note(f"  outside load (CPU used by other processes, share of both CPUs) during the "
             f"timed passes: median {median(outside):.0%}, max {max(outside):.0%}")
    res.note(f"  warm: zarrfuse had {resident_zf / MiB:.0f} MiB of {total / MiB:.0f} MiB in its "
             f"page cache before the warm passes; its daemon read "
             f"{max(warm_fetched['zarrfuse']) / MiB:.1f} MiB per warm pass, bindfs's "
             f"{min(warm_fetched['bindfs']) / MiB:.0f} MiB (bindfs does not keep the cache)")

    c = {k: median(v) for k, v in cold.items()}
    w = {k: median(v) for k, v in warm.items()}
    res.note("")
    res.note(f"  MB/s (1 MB = 10^6 bytes), median of {args.repeat} passes [min-max]:")
    res.note("  | pass | direct | bindfs | zarrfuse | zarrfuse/bindfs | zarrfuse/direct |")
    res.note("  |---|---:|---:|---:|---:|---:|")
    for label, v, raw in (("mount cache cold", c, cold), ("warm re-read", w, warm)):
        cells = " | ".join(f"{v[k]:.0f} [{min(raw[k]):.0f}-{max(raw[k]):.0f}]"
                           for k in ("direct", "bindfs", "zarrfuse"))
        res.note(f"  | {label} | {cells} | {v['zarrfuse'] / v['bindfs']:.2f} "
                 f"| {v['zarrfuse'] / v['direct']:.2f} |")
    res.note("")
    res.add("1. sequential read, mount cache cold (MB/s)", c["zarrfuse"], c["bindfs"], "bindfs",
            "MB/s", ">= 0.8x bindfs", c["zarrfuse"] >= 0.8 * c["bindfs"], "{:.0f}")
    res.add("1. sequential read, mount cache cold (MB/s)", c["zarrfuse"], c["direct"],
            "direct (store warm)", "MB/s", "-", None, "{:.0f}")
    res.add("2. warm re-read (MB/s)", w["zarrfuse"], w["direct"], "direct", "MB/s",
            ">= 0.5x direct", w["zarrfuse"] >= 0.5 * w["direct"], "{:.0f}")
    res.add("2. warm re-read (MB/s)", w["zarrfuse"], w["bindfs"], "bindfs", "MB/s", "-", None,
            "{:.0f}")
    for row in res.rows[-4:]:
        row.caveat = busy_caveat(outside) if row.ok is not None else ""
    mounts.drop(zf)
    mounts.drop(bf)


def count_find(root: str) -> tuple[int, int]:
    """(files, directories) that ``find`` reports under root (untimed check)."""
    out = run(["find", root, "-printf", "%y\\n"], timeout=LIST_TIMEOUT,
              stdout=subprocess.PIPE, check=True).stdout.split()
    return out.count(b"f"), out.count(b"d")


def bench_listing(root: Path, n_chunks: int, mounts: Mounts, mnt: Path, args,
                  res: Results) -> None:
    log(f"[3] ls -lR / find over {n_chunks} chunk files; warming the store")
    commands = {"ls -lR": ["ls", "-lR"], "find": ["find"]}
    times: dict[str, dict[str, list[float]]] = {c: {} for c in commands}
    counts = {}
    outside: list[float] = []
    for cname, cmd in commands.items():
        timed([*cmd, str(root)])  # warm the store's dentries and inodes
        times[cname]["direct"] = [timed([*cmd, str(root)]) for _ in range(max(3, args.repeat))]
        log(f"    {cname:7s} direct    {median(times[cname]['direct']):7.2f} s (warm)")
    counts["direct"] = count_find(str(root))
    for cname in commands:
        for cls in (BindfsMount, ZarrfuseMount):
            times[cname][cls.kind] = []
    for _ in range(args.ls_repeat):  # interleaved, so drift hits both contenders alike
        for cname, cmd in commands.items():
            for cls in (BindfsMount, ZarrfuseMount):
                m = mounts.make(cls, root, mnt / f"{cls.kind}-ls")  # fresh mount: cold kernel
                try:
                    WATCHDOG.arm(LIST_TIMEOUT + 30, f"{cname} {cls.kind}")
                    load = OutsideLoad(m.pid)
                    times[cname][cls.kind].append(timed([*cmd, m.mountpoint]))
                    outside.append(load.stop())
                    WATCHDOG.disarm()
                    log(f"    {cname:7s} {cls.kind:9s} {times[cname][cls.kind][-1]:7.2f} s "
                        f"(fresh mount; outside load {outside[-1]:.0%})")
                    if cls.kind not in counts:
                        counts[cls.kind] = count_find(m.mountpoint)
                finally:
                    mounts.drop(m)
    for kind, (files, _dirs) in counts.items():
        if files != n_chunks + 1:  # + zarr.json
            raise RuntimeError(f"{kind}: find saw {files} files, expected {n_chunks + 1}")
    res.note(f"  find saw {n_chunks} chunk files + zarr.json in each; directories: "
             + ", ".join(f"{k} {d}" for k, (_f, d) in counts.items()))
    res.note(f"  outside load during the mount runs: median {median(outside):.0%}, max "
             f"{max(outside):.0%} (a busy machine speeds up bindfs's per-file round trips)")
    res.note(f"  direct: median of {max(3, args.repeat)} warm runs; mounts: "
             f"{args.ls_repeat} run(s) each on a fresh mount (median); LC_ALL=C")
    res.note("")
    res.note("  seconds, median [min-max]:")
    res.note("  | command | direct (warm) | bindfs (fresh) | zarrfuse (fresh) | zarrfuse/bindfs "
             "| zarrfuse/direct |")
    res.note("  |---|---:|---:|---:|---:|---:|")
    for cname in commands:
        t = {k: median(v) for k, v in times[cname].items()}
        cells = " | ".join(f"{t[k]:.2f} s [{min(times[cname][k]):.2f}-{max(times[cname][k]):.2f}]"
                           for k in ("direct", "bindfs", "zarrfuse"))
        res.note(f"  | {cname} | {cells} | {t['zarrfuse'] / t['bindfs']:.2f} "
                 f"| {t['zarrfuse'] / t['direct']:.1f} |")
    res.note("")
    t = {k: median(v) for k, v in times["ls -lR"].items()}
    res.add(f"3. ls -lR, {n_chunks} chunks, fresh mount (s)", t["zarrfuse"], t["bindfs"],
            "bindfs (fresh)", "s", "<= 0.5x bindfs", t["zarrfuse"] <= 0.5 * t["bindfs"], "{:.2f}")
    res.add(f"3. ls -lR, {n_chunks} chunks, fresh mount (s)", t["zarrfuse"], t["direct"],
            "direct (warm)", "s", "<= 10x direct", t["zarrfuse"] <= 10 * t["direct"], "{:.2f}")
    t = {k: median(v) for k, v in times["find"].items()}
    res.add(f"3. find, {n_chunks} chunks, fresh mount (s)", t["zarrfuse"], t["bindfs"],
            "bindfs (fresh)", "s", "-", None, "{:.2f}")
    res.add(f"3. find, {n_chunks} chunks, fresh mount (s)", t["zarrfuse"], t["direct"],
            "direct (warm)", "s", "-", None, "{:.2f}")
    for row in res.rows[-4:]:
        row.caveat = busy_caveat(outside) if row.ok is not None else ""


def bench_heads(root: Path, views: list[str], shard_size: int, mounts: Mounts, mnt: Path,
                args, res: Results, how: str) -> None:
    head = args.sizes.head
    delivered = len(views) * head
    log(f"[4] first {head // KiB} KiB of {len(views)} shards of {shard_size} bytes")
    out = {}
    for cls in (BindfsMount, ZarrfuseMount):
        m = mounts.make(cls, root, mnt / f"{cls.kind}-shards")
        try:
            paths = [os.path.join(m.mountpoint, v if cls is ZarrfuseMount else store_key(
                (i, 0))) for i, v in enumerate(views)]
            ra = m.read_ahead_kb
            r0 = rchar(m.pid)
            WATCHDOG.arm(args.phase_timeout, f"heads {cls.kind}")
            t0 = time.perf_counter()
            n = read_heads(paths, head)
            dt = time.perf_counter() - t0
            WATCHDOG.disarm()
            got = rchar(m.pid) - r0
            if n != delivered:
                raise RuntimeError(f"{cls.kind}: delivered {n} bytes, expected {delivered}")
            out[cls.kind] = (got, ra, dt)
            log(f"    {cls.kind:9s} fetched {got / MiB:7.2f} MiB for {n / MiB:.2f} MiB "
                f"delivered, read_ahead_kb {ra}, {dt * 1000:.0f} ms")
        finally:
            mounts.drop(m)
    res.note(f"  store: {how}; each shard {shard_size} bytes ({shard_size / MiB:.2f} MiB)")
    res.note(f"  fetched = daemon's /proc/PID/io rchar delta; delivered = {len(views)} x "
             f"{head // KiB} KiB = {delivered / MiB:.2f} MiB")
    res.note("  allowance = 2 x delivered + files x read_ahead_kb of the mount's bdi")
    res.note("")
    res.note("  | mount | read_ahead_kb | fetched MiB | fetched/delivered | allowance MiB | "
             "time ms |")
    res.note("  |---|---:|---:|---:|---:|---:|")
    for kind, (got, ra, dt) in out.items():
        allowance = 2 * delivered + len(views) * ra * KiB
        res.note(f"  | {kind} | {ra} | {got / MiB:.2f} | {got / delivered:.2f} | "
                 f"{allowance / MiB:.2f} | {dt * 1000:.0f} |")
    res.note("")
    got, ra, _ = out["zarrfuse"]
    allowance = 2 * delivered + len(views) * ra * KiB
    res.add(f"4. first {head // KiB} KiB of {len(views)} shards: fetched (MiB)", got / MiB,
            delivered / MiB, "delivered", "MiB",
            f"<= 2x + {len(views)} x {ra} KiB RA = {allowance / MiB:.1f} MiB",
            got <= allowance, "{:.2f}")
    bgot, _bra, _ = out["bindfs"]
    res.add(f"4. first {head // KiB} KiB of {len(views)} shards: fetched (MiB)", got / MiB,
            bgot / MiB, "bindfs fetched", "MiB", "-", None, "{:.2f}")


def zarrfuse_revision() -> str:
    """The commit the measured zarrfuse came from, and whether its sources differ from it
    (the package is installed editable: mounts run whatever the working tree holds)."""
    src = Path(zarrfuse.__file__).resolve().parent
    try:
        head = run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                   stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
        dirty = run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                    stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return f"{src} (not a git checkout)"
    return f"{src} at {head}" + (" with uncommitted changes" if dirty else "")


# --- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--workdir", type=Path, help="scratch directory (default: a new one in /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--repeat", type=int, default=5, help="timed passes per read measurement")
    p.add_argument("--ls-repeat", type=int, default=3,
                   help="fresh-mount runs of ls -lR / find per FUSE contender (median)")
    p.add_argument("--bufsize", type=int, default=1 * MiB, help="readinto() buffer, bytes")
    p.add_argument("--phase-timeout", type=float, default=300.0,
                   help="seconds before the watchdog aborts the FUSE connections")
    p.add_argument("--zarrfuse", default=str(DEFAULT_ZARRFUSE), help="zarrfuse executable")
    args = p.parse_args(argv)
    args.sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    ZarrfuseMount.executable = args.zarrfuse
    for tool in ("bindfs", "fusermount3", "ls", "find"):
        if shutil.which(tool) is None:
            print(f"missing {tool} (apt-get install -y bindfs fuse3)", file=sys.stderr)
            return 2

    started = time.perf_counter()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="bench-mount-read-", dir=args.workdir))
    else:
        work = Path(tempfile.mkdtemp(prefix="bench-mount-read-"))
    mnt = work / "mnt"
    mounts = Mounts()
    res = Results()
    try:
        rng = np.random.default_rng(12345)
        t0 = time.perf_counter()
        log(f"creating stores in {work}")
        seq = make_seq_data(work / "seq.zarr", args.sizes, rng)
        n_chunks = make_ls_data(work / "ls.zarr", args.sizes.ls_shape)
        heads, shard_size = make_shard_data(work / "shards.zarr", args.sizes, rng)
        how = (f"one real sharded zarr array (shape {args.sizes.shards * args.sizes.shard_shape[0]}"
               f"x{args.sizes.shard_shape[1]} uint8, shards {args.sizes.shard_shape}); shard 0 "
               f"written by zarr, the other {args.sizes.shards - 1} keys hard links to it")
        # Write the new stores back now, so writeback (CPU and I/O for ~1.3 GiB and 100k
        # inodes) does not run as outside load during the timed passes.
        run(["sync", "-f", str(work)], timeout=LIST_TIMEOUT, check=True)
        log(f"stores ready (and synced) in {time.perf_counter() - t0:.1f} s")
        sizes_mib = sorted({round(s / MiB, 2) for s in seq.sizes})
        res.note(f"[1+2] sequential data: group of {len(args.sizes.seq_arrays)} uncompressed "
                 f"uint8 arrays, {len(seq.keys)} chunk files, {seq.total / MiB:.0f} MiB, "
                 f"file sizes {sizes_mib} MiB, random bytes")
        bench_sequential(seq, mounts, mnt, args, res)
        res.note(f"[3] listing data: array {args.sizes.ls_shape} uint8, chunks (1, 1): "
                 f"{n_chunks} stored chunks of 1 byte (zarr.json by zarr, files c/i/j written "
                 f"directly)")
        bench_listing(work / "ls.zarr", n_chunks, mounts, mnt, args, res)
        res.note(f"[4] shard data: {args.sizes.shards} shards")
        bench_heads(work / "shards.zarr", heads, shard_size, mounts, mnt, args, res, how)
    finally:
        WATCHDOG.disarm()
        mounts.close()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    elapsed = time.perf_counter() - started
    revision = zarrfuse_revision()
    print()
    print(f"## zarrfuse read benchmark ({'quick' if args.quick else 'default sizes'}, "
          f"{os.cpu_count()} CPUs, kernel {os.uname().release}, run took {elapsed:.0f} s)")
    print()
    print(f"zarrfuse: {revision}")
    print()
    print("| measure | zarrfuse | baseline | ratio | floor | result |")
    print("|---|---:|---:|---:|---|---|")
    for r in res.rows:
        print(f"| {r.measure} | {r.fmt.format(r.value)} | {r.fmt.format(r.baseline)} "
              f"({r.baseline_name}) | {r.ratio:.2f} | {r.floor} | {result_text(r.ok)}{r.caveat} |")
    misses = [r for r in res.rows if r.ok is False]
    print()
    print(f"{len(misses)} floor(s) missed" if misses else "all floors met")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
