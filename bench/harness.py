"""The one benchmark harness: mounts, interleaved rounds, medians and the table.

A scenario (``bench/scenarios/NAME.py``) says what it measures and against what: its
``measure(ctx)`` builds its data, times its contenders through ``ctx.interleave`` (every
contender once per round, the order rotating, so the machine's drift hits all alike) and
returns ``Row``s. A row is a figure beside the baseline it is a ratio of, measured in the
same run, and where there is one, its bound: the same figure of a reader that costs a FUSE
daemon nothing more (the pyfuse3 ceiling, the page cache). A floor the figure misses and
its bound meets is zarrfuse's own cost; one its bound misses too is out of reach of any
filesystem served through pyfuse3 on the machine, and the verdict says which.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tests.mounting import daemon_pid, force_unmount, is_mounted, wait_mounted

KiB, MiB, MB = 1 << 10, 1 << 20, 1e6
HERE = Path(__file__).resolve().parent
ZARRFUSE = [sys.executable, "-m", "zarrfuse"]
C_ENV = {**os.environ, "LC_ALL": "C"}  # the same collation (and speed) of ls in every run
T = TypeVar("T")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(cmd: Sequence[str | os.PathLike[str]], timeout: float = 300.0, *, check: bool = True,
        env: dict[str, str] | None = None, input: str | bytes | None = None,
        **kw) -> subprocess.CompletedProcess:
    """``cmd`` run to its exit, killed by a timer if it overruns.

    subprocess's own timeout polls the child every 50 ms once it has run 63 ms, so a command
    timed around it took 64, 115, 165 or 215 ms whatever it really took; here the parent
    blocks in ``waitpid``."""
    killed = threading.Event()
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    with subprocess.Popen([os.fspath(c) for c in cmd], env=env or C_ENV, **kw) as proc:

        def overrun() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, overrun)
        timer.start()
        try:
            out, err = proc.communicate(input)
        finally:
            timer.cancel()
    if killed.is_set() and proc.returncode == -signal.SIGKILL:
        raise subprocess.TimeoutExpired(proc.args, timeout, out, err)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def timed(cmd: Sequence[str | os.PathLike[str]], timeout: float = 600.0) -> float:
    """Seconds ``cmd`` takes, its output thrown away; raises if it fails or overruns."""
    return seconds(lambda: run(cmd, timeout, stdout=subprocess.DEVNULL))


def drop_caches() -> None:
    """Write dirty pages back, then drop the page cache, dentries and inodes (every mount's
    and the store's): what is read next starts cold everywhere."""
    run(["sync"], 300.0)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def proc_field(pid: int, name: str, file: str = "status") -> int:
    """A number of ``/proc/PID/status`` (``VmHWM``, kB) or ``/proc/PID/io`` (``rchar``)."""
    for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/{file} has no {name}")


def read_all(paths: Sequence[str | os.PathLike[str]], bufsize: int = MiB) -> tuple[int, float]:
    """Bytes and seconds to open, read in full and close every file, in this process."""
    buf, total = [bytearray(bufsize)], 0
    start = time.perf_counter()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while n := os.readv(fd, buf):
                total += n
        finally:
            os.close(fd)
    return total, time.perf_counter() - start


# --- mounts --------------------------------------------------------------------------------


class Watchdog:
    """Aborts every FUSE connection of this run if a phase overruns: a stuck read then fails
    (ENOTCONN) instead of hanging the benchmark and the ``finally`` that unmounts."""

    def __init__(self) -> None:
        self.connections: set[int] = set()
        self._timer: threading.Timer | None = None

    def arm(self, timeout: float, label: str) -> None:
        self.disarm()
        self._timer = threading.Timer(timeout, self._fire, args=(label,))
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def abort(self, conn: int) -> None:
        with suppress(OSError):
            Path(f"/sys/fs/fuse/connections/{conn}/abort").write_text("1")

    def _fire(self, label: str) -> None:
        log(f"!! watchdog: {label!r} overran; aborting the FUSE connections")
        for conn in list(self.connections):
            self.abort(conn)


class Mount:
    """A FUSE mount at ``where``: ``zarrfuse mount`` (which returns once the mount is live;
    its daemon found by its command line) or a daemon run in the foreground as our child
    (bindfs, the pyfuse3 passthroughs, rclone, s3fs). Unmounted with escalating force."""

    def __init__(self, where: Path, pid: int, proc: subprocess.Popen | None,
                 watchdog: Watchdog) -> None:
        self.where, self.pid, self.proc, self.watchdog = where, pid, proc, watchdog
        self.conn = os.minor(_stat_dev(where))
        watchdog.connections.add(self.conn)

    @property
    def read_ahead_kb(self) -> int:
        return int(Path(f"/sys/class/bdi/0:{self.conn}/read_ahead_kb").read_text())

    def unmount(self) -> None:
        if self.proc is None and is_mounted(self.where):
            try:
                run([*ZARRFUSE, "umount", self.where], 60.0, stdout=subprocess.DEVNULL)
            except (subprocess.SubprocessError, OSError) as e:
                log(f"!! zarrfuse umount {self.where}: {e}; forcing")
        if is_mounted(self.where) and not force_unmount(self.where):
            self.watchdog.abort(self.conn)
            force_unmount(self.where)
        self.watchdog.connections.discard(self.conn)
        if self.proc is not None:
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        else:  # the daemon exits once unmounted: wait, so the next mount starts alone
            deadline = time.monotonic() + 15
            while os.path.exists(f"/proc/{self.pid}") and time.monotonic() < deadline:
                if Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    break
                time.sleep(0.02)


def _stat_dev(path: Path, timeout: float = 10.0) -> int:
    """The device of a fresh mount, from a thread: a stat of a stuck mount never returns."""
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(os.stat(path).st_dev), daemon=True)
    t.start()
    t.join(timeout)
    if not got:
        raise RuntimeError(f"stat {path} did not answer in {timeout:g} s")
    return got[0]


# --- rows ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """An issue's floor: the figure / baseline ``at_most`` or at least ``limit``; or, with
    ``absolute``, the figure itself (in the row's unit)."""

    limit: float
    at_most: bool
    absolute: bool = False

    def holds(self, x: float) -> bool:
        return x <= self.limit if self.at_most else x >= self.limit

    def text(self, unit: str) -> str:
        return f"{'<=' if self.at_most else '>='} {self.limit:g}" + (
            f" {unit}".rstrip() if self.absolute else "x")


def at_most(limit: float, absolute: bool = False) -> Floor:
    return Floor(limit, True, absolute)


def at_least(limit: float, absolute: bool = False) -> Floor:
    return Floor(limit, False, absolute)


Samples = list[float]
"""A figure's value in each round (a contender that failed in every round has none)."""


@dataclass
class Row:
    measure: str
    unit: str
    value: Samples
    baseline: tuple[str, Samples] | None = None
    bound: tuple[str, Samples] | None = None
    floor: Floor | None = None
    issue: str = ""
    scenario: str = ""

    @staticmethod
    def median(samples: Samples | None) -> float | None:
        return statistics.median(samples) if samples else None

    def ratio(self, samples: Samples | None) -> float | None:
        v = self.median(samples)
        b = self.median(self.baseline[1]) if self.baseline else None
        return v / b if v is not None and b else None

    def holds(self) -> str:
        """yes; no (bound meets it); no, out of reach (its bound misses too); or blank."""
        if self.floor is None:
            return ""
        got = self.median(self.value) if self.floor.absolute else self.ratio(self.value)
        if got is None:
            return "n/a"
        if self.floor.holds(got):
            return "yes"
        if self.bound is None:
            return "no"
        bound = (self.median(self.bound[1]) if self.floor.absolute
                 else self.ratio(self.bound[1]))
        if bound is None:
            return "no"
        return "no (bound meets it)" if self.floor.holds(bound) else "no; out of reach"

    def cells(self) -> list[str]:
        def fig(samples: Samples | None) -> str:
            v = self.median(samples)
            return "failed" if v is None else f"{_g(v)} {self.unit}".rstrip()

        def ratio(samples: Samples | None) -> str:
            r = self.ratio(samples)
            return "" if r is None else f"{r:.2f}x"

        base = f"{fig(self.baseline[1])} {self.baseline[0]}" if self.baseline else ""
        bound = f"{fig(self.bound[1])} {self.bound[0]}" if self.bound else ""
        return [self.scenario, self.issue, self.measure, fig(self.value), base,
                ratio(self.value) if self.baseline else "", bound,
                ratio(self.bound[1]) if self.bound and self.baseline else "",
                self.floor.text(self.unit) if self.floor else "", self.holds()]


def _g(v: float) -> str:
    """Three significant figures, no exponent for the sizes figures come in."""
    return f"{v:.3g}" if 1e-3 <= abs(v) < 1e3 else f"{v:.0f}"


HEADER = ["scenario", "issue", "measure", "figure", "baseline (same run)", "ratio",
          "bound (same run)", "bound ratio", "floor", "holds"]


def table(rows: Sequence[Row]) -> str:
    """The one table, in Markdown (which also reads as plain text)."""
    lines = ["| " + " | ".join(HEADER) + " |",
             "|" + "|".join("---:" if h in ("figure", "ratio", "bound ratio") else "---"
                            for h in HEADER) + "|"]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


# --- a run ---------------------------------------------------------------------------------


@dataclass
class Context:
    """What a scenario is handed: its scratch directory, the sizes (``quick``), the rounds,
    and the mounts it makes (all unmounted when it ends, whatever happens)."""

    work: Path
    quick: bool
    rounds: int
    phase_timeout: float = 300.0
    watchdog: Watchdog = field(default_factory=Watchdog)
    stack: ExitStack = field(default_factory=ExitStack)
    failures: list[str] = field(default_factory=list)

    def pick(self, full: object, quick: object):  # type: ignore[no-untyped-def]
        """The full-size value, or in ``--quick`` the small one."""
        return quick if self.quick else full

    def mount(self, source: str | os.PathLike[str], where: Path, *options: str,
              env: dict[str, str] | None = None) -> Mount:
        """``zarrfuse mount SOURCE WHERE OPTIONS...``, unmounted when the scenario ends (or
        earlier, with ``unmount``)."""
        where.mkdir(parents=True, exist_ok=True)
        run([*ZARRFUSE, "mount", os.fspath(source), where, *options], 120.0,
            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)
        m = Mount(where, daemon_pid(where), None, self.watchdog)
        self.stack.callback(m.unmount)
        return m

    def foreground(self, argv: Sequence[str | os.PathLike[str]], where: Path,
                   env: dict[str, str | None] | None = None, timeout: float = 90.0) -> Mount:
        """A FUSE daemon run in the foreground as our child, mounted at ``where`` (the last
        of ``argv`` or named in it); its log beside the mountpoint. ``env`` adds to ours
        (None: leaves the variable out)."""
        merged = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
        where.mkdir(parents=True, exist_ok=True)
        logfile = where.parent / f"{where.name}.log"
        with open(logfile, "ab") as err:
            proc = subprocess.Popen([os.fspath(a) for a in argv], stdout=err, stderr=err,
                                    env=merged, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not wait_mounted(where, 0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{argv[0]} did not mount {where}: "
                                   f"{logfile.read_text(errors='replace')[-2000:]}")
        m = Mount(where, proc.pid, proc, self.watchdog)
        self.stack.callback(m.unmount)
        return m

    def unmount(self, m: Mount) -> None:
        m.unmount()  # its callback on the stack finds nothing mounted later

    def interleave(self, contenders: dict[str, Callable[[], T]],
                      rounds: int | None = None) -> dict[str, list[T]]:
        """Each contender once per round, the order rotating from round to round; each call
        under the watchdog. A contender that fails is logged and left out of that round (the
        others still run): its figure reads "failed" if it never succeeded."""
        out: dict[str, list[T]] = {name: [] for name in contenders}
        names = list(contenders)
        n = rounds or self.rounds
        for rnd in range(n):
            order = names[rnd % len(names):] + names[: rnd % len(names)]
            for name in order:
                self.watchdog.arm(self.phase_timeout, name)
                try:
                    out[name].append(contenders[name]())
                    log(f"  round {rnd + 1}/{n} {name}: {str(out[name][-1])[:120]}")
                # a report: one contender's failure is recorded, the others still run
                except Exception as e:  # noqa: BLE001  (see above)
                    log(f"!! {name}: {type(e).__name__}: {e}")
                    self.failures.append(f"{name} (round {rnd + 1}): {type(e).__name__}: {e}")
                finally:
                    self.watchdog.disarm()
        return out
