"""The hostile-store catalogue of issue 34: stores built to hurt a reader, each mounted and
walked as a user's tools would, counting what went wrong.

Each case is a group with a healthy array ``ok`` and an array ``bad`` that a builder makes
hostile: special files at chunk keys and metadata documents, symlinks out of the store and
in loops, decompression bombs of every streaming codec, oversized and malformed documents.
The group is mounted read-only twice (raw files at their keys, and ``--format tiff``);
``find`` and ``cat`` of every file run under a timeout. Counted per case: whether the mount
came up, a hang (the daemon does not answer), an escape (a byte from outside the store
served), EIO answers, whether ``ok`` still reads exact, whether the walk ended (a rendered
view shows every position of the grid, so a sparse 2**62-wide array is a tree no walk
ends), and the daemon's RSS peak.

Used by the torture tier (``tests/fuse/test_mount_torture.py``, every case, one view) and
``python -m bench run hostile`` (every case, both views, larger bombs).

Web servers that lie (issue 52, ``WEB_CASES``): the same group served over HTTP by
``tests.http_servers.MisbehavingServer``, whose answers for the chunk ``bad/c/1/0`` lie in one
way each (a 1.5 GiB body, a wrong Content-Length, a trickle, slow or huge headers, a redirect
loop or to another host); ``probe_web`` mounts it (``--store-timeout``), walks and reads it,
and also returns the daemon's log, where each fault must be a WARNING naming the server's
fault, never an ERROR.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import google_crc32c
import numcodecs
import numpy as np

__all__ = ["CASES", "SECRET", "WEB_CASES", "CaseResult", "build_case", "probe", "probe_web"]

SECRET = b"outside the store: never to be served" * 8
OK_VALUE = 7


def _zstd_stream(size: int) -> bytes:
    zeros = subprocess.Popen(["head", "-c", str(size), "/dev/zero"], stdout=subprocess.PIPE)
    frame = subprocess.run(["zstd", "-1", "-c"], stdin=zeros.stdout, capture_output=True,
                           check=True).stdout
    zeros.wait()
    return frame


def _shard_holding(inner: bytes, count: int) -> bytes:
    """A shard (index at the end, crc32c) whose first of ``count`` inner chunks is
    ``inner`` and whose others are not stored."""
    empty = (2**64 - 1, 2**64 - 1)
    entries = [(0, len(inner))] + [empty] * (count - 1)
    index = b"".join(struct.pack("<QQ", *entry) for entry in entries)
    return inner + index + struct.pack("<I", google_crc32c.value(index))


def _gzip_stream(size: int) -> bytes:
    packer, window = zlib.compressobj(1, wbits=31), bytes(1 << 20)
    return b"".join(packer.compress(window) for _ in range(size >> 20)) + packer.flush()


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _socket(path: Path) -> None:
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))


def _device(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers


def _link(target: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    return make


def _replace_dir(path: Path, target: str) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        child.unlink() if not child.is_dir() else child.rmdir()
    path.rmdir()
    path.symlink_to(target)


@dataclass(frozen=True)
class Case:
    """A hostile thing and where it goes in array ``bad``."""

    kind: str
    at: str  # "chunk", "document", "chunk-dir", or "array"
    make: Callable[[Path, Path, int], None]
    """(the path it replaces, the outside directory, the bomb size) -> None"""
    codec: str = "none"  # what ``bad`` is compressed with: none, zstd, gzip-v2, blosc


def _bytes(data: Callable[[int], bytes]) -> Callable[[Path, Path, int], None]:
    return lambda path, outside, size: path.write_bytes(data(size))


CASES: dict[str, Case] = {
    "fifo-chunk": Case("special", "chunk", lambda p, o, s: _fifo(p)),
    "socket-chunk": Case("special", "chunk", lambda p, o, s: _socket(p)),
    "device-chunk": Case("special", "chunk", lambda p, o, s: _device(p)),
    "fifo-document": Case("special", "document", lambda p, o, s: _fifo(p)),
    "device-document": Case("special", "document", lambda p, o, s: _device(p)),
    "dev-zero-document": Case("special", "document", lambda p, o, s: _link("/dev/zero")(p)),
    "link-out-chunk": Case("escape", "chunk", lambda p, o, s: _link(str(o / "secret"))(p)),
    "relative-out-chunk": Case("escape", "chunk",
                               lambda p, o, s: _link("../../../../outside/secret")(p)),
    "link-out-dir": Case("escape", "chunk-dir", lambda p, o, s: _replace_dir(p, str(o))),
    "loop-dir": Case("loop", "chunk-dir", lambda p, o, s: (p / "loop").symlink_to("..")),
    "loop-pair": Case("loop", "chunk-dir", lambda p, o, s: (
        (p / "x").symlink_to("y"), (p / "y").symlink_to("x"))),
    "zstd-declared-bomb": Case("bomb", "chunk", _bytes(
        lambda s: numcodecs.Zstd(level=1).encode(bytes(s))), "zstd"),
    "zstd-stream-bomb": Case("bomb", "chunk", _bytes(_zstd_stream), "zstd"),
    "gzip-v2-bomb": Case("bomb", "chunk", _bytes(_gzip_stream), "gzip-v2"),
    "sharded-zstd-stream-bomb": Case("bomb", "chunk", _bytes(
        lambda s: _shard_holding(_zstd_stream(s), 4)), "zstd-sharded"),
    "blosc-bomb": Case("bomb", "chunk", _bytes(
        lambda s: numcodecs.Blosc(cname="zstd").encode(bytes(s))), "blosc"),
    "huge-document": Case("document", "document",
                          lambda p, o, s: os.truncate(p, 300 << 20)),
    "garbage-document": Case("document", "document",
                             lambda p, o, s: p.write_bytes(b"{not json at all")),
    "huge-shape": Case("document", "array", lambda p, o, s: _huge_shape(p)),
}


def _huge_shape(array_dir: Path) -> None:
    import json  # noqa: PLC0415

    doc = json.loads((array_dir / "zarr.json").read_text())
    doc["shape"] = [2**62, 2**62]
    (array_dir / "zarr.json").write_text(json.dumps(doc))


def _array(path: Path, codec: str, value: int) -> None:
    import zarr  # noqa: PLC0415

    compressors: list = []
    if codec == "zstd":
        compressors = [zarr.codecs.ZstdCodec(level=1)]
    elif codec == "blosc":
        compressors = [zarr.codecs.BloscCodec(cname="zstd")]
    elif codec == "gzip-v2":
        compressors = [numcodecs.GZip(1)]
    sharded = codec.endswith("sharded")
    if sharded:
        compressors = [zarr.codecs.ZstdCodec(level=1)]
    zarr.create_array(path, shape=(128, 64), chunks=(32, 32) if sharded else (64, 64),
                      shards=(64, 64) if sharded else None, dtype="u1", fill_value=0,
                      compressors=compressors or None,
                      zarr_format=2 if codec.endswith("v2") else 3)[...] = value


def build_case(root: Path, name: str, bomb_bytes: int = 256 << 20) -> tuple[Path, Path]:
    """The case's group and the directory outside it (holding ``SECRET``)."""
    case = CASES[name]
    outside = root / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret").write_bytes(SECRET)
    (outside / "0").write_bytes(SECRET)
    group = root / "store.zarr"
    group.mkdir(parents=True)
    (group / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    _array(group / "ok", "none", OK_VALUE)
    _array(group / "bad", case.codec, 3)
    v2 = case.codec.endswith("v2")
    chunk = group / "bad" / ("1.0" if v2 else "c/1/0")
    where = {
        "chunk": chunk,
        "document": group / "bad" / (".zarray" if v2 else "zarr.json"),
        "chunk-dir": group / "bad" / "c" / "1",
        "array": group / "bad",
    }[case.at]
    case.make(where, outside, bomb_bytes)
    return group, outside


@dataclass
class CaseResult:
    case: str
    view: str
    mounted: bool
    hang: bool
    escape: bool
    eio: int
    files: int
    ok_exact: bool
    rss_peak_mib: float
    walk_ended: bool = True
    """False: ``find`` was still walking at the timeout (the daemon answering meanwhile)."""
    why: str = ""
    """Why the mount did not come up (zarrfuse's stderr, or what found no daemon)."""

    @property
    def bad(self) -> bool:
        """A hang, an escape, the healthy array lost, or the daemon past 400 MiB."""
        return (not self.mounted or self.hang or self.escape or not self.ok_exact
                or self.rss_peak_mib > 400)


def _rss_peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def probe(group: Path, mountpoint: Path, view: str, timeout: float = 60.0) -> CaseResult:
    """Mount ``group`` read-only in ``view`` ("raw" or "tiff"), walk and read every file."""
    from tests.mounting import daemon_pid, mounted  # noqa: PLC0415

    args = ["--read-only", "--metadata-ttl", "0"]
    args += ["--layout", "source"] if view == "raw" else ["--format", "tiff"]
    name = group.parent.name
    try:
        with mounted(group, mountpoint, *args) as mnt:
            pid = daemon_pid(mnt)
            try:
                walk = subprocess.run(
                    ["find", str(mnt), "-type", "f", "-exec", "cat", "{}", "+"],
                    capture_output=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:  # an endless tree, or a daemon that hangs?
                answers = subprocess.run(["timeout", "5", "stat", str(mnt / "ok")],
                                         capture_output=True, check=False).returncode == 0
                return CaseResult(name, view, True, not answers, False, 0, 0, answers,
                                  _rss_peak_mib(pid), walk_ended=False)
            files = subprocess.run(["find", str(mnt), "-type", "f"], capture_output=True,
                                   timeout=timeout, check=False).stdout.split()
            ok = [Path(os.fsdecode(f)) for f in files if b"/ok/" in f]
            ok_exact = bool(ok) and all(_ok_file(p, view) for p in ok)
            return CaseResult(
                name, view, True, False, SECRET[:32] in walk.stdout,
                walk.stderr.count(b"Input/output error"), len(files), ok_exact,
                _rss_peak_mib(pid))
    except AssertionError as e:  # the mount did not come up: the healthy array is not served
        return CaseResult(name, view, False, False, False, 0, 0, False, 0.0, why=str(e))


def _ok_file(path: Path, view: str) -> bool:
    if view == "raw":
        if path.name in ("zarr.json",):
            return True
        return path.read_bytes() == bytes([OK_VALUE]) * (64 * 64)
    if path.suffix != ".tiff":
        return True
    import tifffile  # noqa: PLC0415

    return bool(np.all(tifffile.imread(path) == OK_VALUE))


WEB_CASES: dict[str, tuple[str, str | None]] = {
    # case: (the server's mode for bad/c/1/0, what the log names; None: the read is exact)
    "huge-body": ("huge-body", None),  # 200 to a range: cut at the bytes asked
    "huge-range": ("huge-range", "sent more than"),
    "short-length": ("short-length", "wrong Content-Length"),
    "long-length": ("long-length", "fewer bytes than its Content-Length"),
    "trickle": ("trickle", "answer within"),
    "slow-headers": ("slow-headers", "answer within"),
    "huge-headers": ("huge-headers", "headers are too large"),
    "redirect-loop": ("loop", "redirects in a loop"),
    "redirect-away": ("redirect-away", "redirected to another host"),
}
WEB_KEY = "bad/c/1/0"
WEB_FILE = "bad/c/0/001/0/000"
"""The file of chunk (1, 0) in the mount's fanout tree (the web server cannot be listed, so
the tree is the grid's positions)."""
WEB_TIMEOUT = 3.0
"""``--store-timeout`` of the web cases."""


def probe_web(root: Path, name: str, mountpoint: Path, timeout: float = 60.0,
              ) -> tuple[CaseResult, str]:
    """Serve a group like ``build_case``'s (no hostile file) with ``WEB_CASES[name]``'s lie
    at ``WEB_KEY``, mount it read-only in the raw view and read every file: the counts, and
    the daemon's log."""
    import zarr  # noqa: PLC0415

    from tests.http_servers import MisbehavingServer  # noqa: PLC0415
    from tests.mounting import daemon_pid, mounted  # noqa: PLC0415

    group = root / "store.zarr"
    group.mkdir(parents=True)
    zarr.open_group(group, mode="w")
    _array(group / "ok", "none", OK_VALUE)
    _array(group / "bad", "none", 3)
    zarr.consolidate_metadata(group)  # a web server cannot list: members come from here
    log = root / "mount.log"
    with MisbehavingServer(root) as server:
        server.modes[f"store.zarr/{WEB_KEY}"] = WEB_CASES[name][0]
        with mounted(f"{server.url}/store.zarr", mountpoint, "--read-only",
                     "--store-timeout", str(WEB_TIMEOUT), "--log-file", str(log)) as mnt:
            pid = daemon_pid(mnt)
            try:
                walk = subprocess.run(
                    ["find", str(mnt), "-type", "f", "-exec", "cat", "{}", "+"],
                    capture_output=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                return CaseResult(name, "raw", True, True, False, 0, 0, False,
                                  _rss_peak_mib(pid)), log.read_text()
            files = [Path(os.fsdecode(f)) for f in subprocess.run(
                ["find", str(mnt), "-type", "f"], capture_output=True, timeout=timeout,
                check=False).stdout.split()]
            ok = [f for f in files if "/ok/" in str(f)]
            bad = [f for f in files if str(f).endswith(WEB_FILE)]
            result = CaseResult(
                name, "raw", True, False, False, walk.stderr.count(b"Input/output error"),
                len(files), bool(ok) and all(_ok_file(p, "raw") for p in ok),
                _rss_peak_mib(pid))
            if WEB_CASES[name][1] is None:  # the lie costs nothing: the chunk reads exact
                result.ok_exact &= len(bad) == 1 and bad[0].read_bytes() == bytes([3]) * 4096
    return result, log.read_text()
