"""Running a mount: in the foreground, or as a background daemon that reports when it is live.

``zarrfuse mount`` without ``--foreground`` must return only once the mount is live, or fail
with the reason and leave nothing mounted. The classic way, ``fork()`` after setup, is not
available: trio, threads and zarr's asyncio loop thread do not survive a fork. So the parent
spawns a fresh ``python -m zarrfuse mount - MOUNTPOINT --foreground --config-fd M --ready-fd N``
in its own session and waits on a pipe: the child writes ``ok`` once ``serve()`` reports the
mount live, or ``error: <message>`` if it failed before that. EOF with nothing written means
it crashed.

The configuration goes to the child as JSON through a pipe (``--config-fd``), never on its
command line: ``/proc/PID/cmdline`` is readable by every local user, and storage options
hold secrets (an S3 secret key). Only the mountpoint shows there, so ``ps`` and ``zarrfuse
umount`` can still tell which mount a daemon serves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO

from zarrfuse.cli.ready_pipe import ReadyPipe, print_note, read_report
from zarrfuse.daemon import mount_log
from zarrfuse.errors import MountError, SourceError, ZarrFuseError
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.handed_fd import handed_fuse_fd
from zarrfuse.fuse.mountpoint import hidden_entries, is_mounted, prepare_mountpoint, unmount

__all__ = [
    "READY_TIMEOUT",
    "check_source",
    "config_from_json",
    "config_json",
    "error_message",
    "mount_in_background",
    "read_config",
    "serve_as_daemon",
    "serve_in_foreground",
]

READY_TIMEOUT = 60.0
"""Seconds the parent waits for the daemon to report; opening a remote store can be slow."""
_REAP_TIMEOUT = 10.0
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_SYSLOG_FORMAT = "%(levelname)s %(name)s: %(message)s"  # syslog stamps the time

log = logging.getLogger(__name__)


def error_message(exc: BaseException) -> str:
    """The one line a user sees for ``exc``: its message, or its type too if it is a bug."""
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, ZarrFuseError):
        text = str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        text = "interrupted"
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = text.split("\n\nDebug source")[0]  # obstore's appendix: the same, as Rust sees it
    return " ".join(text.split()) or type(exc).__name__


# --- checks shared by the foreground and the background path ---------------------------------


def check_source(config: MountConfig) -> None:
    """Open the source and read its ``zarr.json`` as ``serve()`` will, to fail before mounting.

    Uses the same two API functions as ``serve()``, so the error text is the same whichever
    side finds the problem; the read waits at most ``--store-timeout``, as every read does.
    """
    # zarr is slow to import: loaded by a mount only
    import asyncio  # noqa: PLC0415

    from zarrfuse.api.arrays import open_store_path, read_node  # noqa: PLC0415
    from zarrfuse.cli.suffix_warning import suffix_warning  # noqa: PLC0415
    from zarrfuse.storage.store_requests import server_fault  # noqa: PLC0415
    from zarrfuse.zarr_compat import sync  # noqa: PLC0415

    options = dict(config.storage_options) or None
    try:
        store_path = sync(open_store_path(config.source, mode="r", storage_options=options,
                                          allow_redirects=config.allow_redirects))
    except ZarrFuseError:
        raise
    except Exception as e:  # a missing fsspec backend, credentials, network: still the source
        raise SourceError(f"{config.source}: cannot open: {error_message(e)}") from e
    try:
        node = sync(asyncio.wait_for(read_node(store_path), config.store_timeout))
        warning = suffix_warning(store_path, node, config)
        if warning is not None:
            print(f"zarrfuse: {warning}", file=sys.stderr)
    except ZarrFuseError:
        raise
    except TimeoutError:
        raise SourceError(f"{config.source}: cannot read zarr.json: no answer within "
                          f"{config.store_timeout:g} s (--store-timeout)") from None
    except Exception as e:
        why = server_fault(e) or error_message(e)
        raise SourceError(f"{config.source}: cannot read zarr.json: {why}") from e
    finally:
        store_path.store.close()


FUSE_DEVICE = "/dev/fuse"


def check_fuse_device(device: str = FUSE_DEVICE) -> None:
    """Refuse early, saying why, when this user cannot open the FUSE device.

    libfuse opens it as the calling user, and so does the setuid ``fusermount3`` (it drops to
    the user's fsuid for that open, so device permissions are respected); all the user would
    see otherwise is "fuse_session_mount failed". Distributions make it 0666 through udev.
    """
    if os.access(device, os.R_OK | os.W_OK):
        return
    try:
        st = os.stat(device)
    except FileNotFoundError:
        raise MountError(f"{device} does not exist: is the fuse kernel module loaded?") from None
    mode = f"{st.st_mode & 0o777:04o}"
    raise MountError(
        f"{device} is not readable and writable by uid {os.getuid()} (mode {mode}); "
        "non-root mounts need it to be 0666, as udev makes it on most systems"
    )


def preflight(config: MountConfig) -> None:
    """Everything that can be checked before mounting: the mountpoint, the source, the device."""
    prepare_mountpoint(config.mountpoint)
    hidden = 0 if config.nonempty else hidden_entries(config.mountpoint)
    if hidden:
        print(f"zarrfuse: warning: {config.mountpoint} is not empty: its {hidden} "
              f"entr{'y is' if hidden == 1 else 'ies are'} hidden while it is mounted "
              "(--nonempty, or -o nonempty, says this is meant)", file=sys.stderr)
    check_source(config)
    if handed_fuse_fd(config.mountpoint) is None:  # else the device is open already
        check_fuse_device()


def _private_log(path: str) -> str:
    """``path``, created mode 0600 if it is not there: a log names files, stores and
    users' programs."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600))
    return path


def configure_logging(config: MountConfig, *, background: bool = False) -> None:
    """Log to ``--log-file``, else (``background``) to syslog or the default file, else
    stderr; DEBUG with ``--debug``, else INFO. The last lines also stay in memory for
    ``zarrfuse log``."""
    # Names may hold any bytes (surrogate-escaped): written escaped, never lost to an
    # encoding error inside logging (stderr escapes them already).
    handler: logging.Handler
    syslog = mount_log.syslog_address() if background else None
    if config.log_file and config.log_file == mount_log.default_log_file(config.mountpoint):
        handler = mount_log.rotating_file_handler(config.log_file)
    elif config.log_file:
        handler = logging.FileHandler(
            _private_log(config.log_file), encoding="utf-8", errors="backslashreplace"
        )
    elif syslog is not None:
        handler = mount_log.syslog_handler(syslog)
    else:
        handler = logging.StreamHandler()
    mount_log.DESTINATION.text = (
        config.log_file or ("syslog (journalctl -t zarrfuse)" if syslog else "stderr")
    )
    handler.setFormatter(logging.Formatter(_SYSLOG_FORMAT if syslog else _LOG_FORMAT))
    mount_log.RECENT.setFormatter(logging.Formatter(_LOG_FORMAT))
    logging.basicConfig(
        level=logging.DEBUG if config.debug else logging.INFO,
        handlers=[handler, mount_log.RECENT], force=True,
    )
    logging.captureWarnings(True)
    pyfuse3_log = logging.getLogger("pyfuse3")
    if not any(isinstance(f, mount_log.AbandonedReplies) for f in pyfuse3_log.filters):
        pyfuse3_log.addFilter(mount_log.AbandonedReplies())


def with_default_log(config: MountConfig) -> MountConfig:
    """A background mount's configuration with a log file of its own when it would otherwise
    log nowhere (no ``--log-file``, no syslog)."""
    if config.log_file or mount_log.syslog_address() is not None:
        return config
    path = mount_log.default_log_file(config.mountpoint)
    try:
        mount_log.prepare_log_file(path)
    except OSError as e:  # no home directory, a read-only one...: mount anyway, say so
        print(f"zarrfuse: the mount logs nowhere: cannot create {path} ({error_message(e)}); "
              "give --log-file", file=sys.stderr)
        return config
    return dataclasses.replace(config, log_file=path)


def _serve(
    config: MountConfig,
    on_ready: Callable[[], None] | None,
    on_note: Callable[[str], None] | None = None,
) -> None:
    """``zarrfuse.fuse.mount.serve``, imported late so the parent never loads pyfuse3."""
    from zarrfuse.daemon.services import OperatingServices  # noqa: PLC0415  (loads trio)
    from zarrfuse.fuse.mount import serve  # noqa: PLC0415  (loads pyfuse3)

    serve(config, on_ready=on_ready, services=OperatingServices(), on_note=on_note)


# --- the foreground path ---------------------------------------------------------------------


def serve_in_foreground(config: MountConfig) -> int:
    """``zarrfuse mount --foreground``: check, mount, serve until unmounted; exit status."""
    configure_logging(config)
    live: list[bool] = []
    try:
        preflight(config)
        _serve(config, on_ready=lambda: live.append(True), on_note=print_note)
    except BaseException as e:
        if config.log_file:  # else the log is stderr, where the CLI prints the one line itself
            _log_failure(e, "serving failed" if live else "mount failed")
        raise
    return 0


def _log_failure(exc: BaseException, what: str) -> None:
    """One log line with the reason; the traceback too when it is a bug."""
    if isinstance(exc, ZarrFuseError | OSError | KeyboardInterrupt):
        log.error("%s: %s", what, error_message(exc))
    else:  # the log file is all anyone will see of the daemon: keep the traceback
        log.exception("%s: %s", what, error_message(exc))


def serve_as_daemon(config: MountConfig, ready_fd: int) -> int:
    """The spawned child: serve, reporting readiness or the first error on ``ready_fd``.

    The parent already ran the preflight checks; ``serve()`` repeats its own.
    """
    pipe = ReadyPipe(ready_fd)
    configure_logging(config, background=True)
    faulthandler.enable()  # a crash leaves a traceback in --log-file
    try:
        _serve(config, on_ready=pipe.ready, on_note=pipe.note)
    except BaseException as e:  # noqa: BLE001  (the parent must hear of any failure, then exit)
        what = "mount failed" if pipe.pending else "serving failed"
        pipe.fail(error_message(e))  # nothing if the parent already heard "ok"
        _log_failure(e, what)
        return 1
    return 0


# --- the background path: the parent --------------------------------------------------------


def config_json(config: MountConfig) -> bytes:
    """The whole configuration, for the daemon (every field of MountConfig)."""
    return json.dumps(dataclasses.asdict(config)).encode()


def config_from_json(data: bytes) -> MountConfig:
    """The configuration :func:`config_json` wrote."""
    fields = json.loads(data)
    fields["fuse_options"] = tuple(fields.get("fuse_options") or ())
    return MountConfig(**fields)


def read_config(fd: int) -> MountConfig:
    """The configuration the parent wrote on ``fd`` (read to EOF, then closed)."""
    with os.fdopen(fd, "rb") as pipe:
        return config_from_json(pipe.read())


def daemon_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """The daemon's environment: the caller's, with one BLAS thread unless the caller chose.
    The daemon does no linear algebra, and each OpenBLAS thread spins for about 0.1 s of CPU
    once numpy loads, while the mount starts (docs/performance.md, "Starting a mount")."""
    return {"OPENBLAS_NUM_THREADS": "1", **parent}


def _spawn(config: MountConfig, ready_fd: int) -> subprocess.Popen[bytes]:
    """Start the daemon in its own session, detached from our terminal and files."""
    config_read, config_write = os.pipe()
    try:
        # Small enough for the pipe's buffer (64 KiB): written whole before the child runs.
        os.write(config_write, config_json(config))
    finally:
        os.close(config_write)
    argv = [sys.executable, "-m", "zarrfuse", "mount", "-", config.mountpoint, "--foreground",
            "--config-fd", str(config_read), "--ready-fd", str(ready_fd)]
    # Closed in the finally below, once the child holds its own copy.
    log_file: IO[bytes] | None = (
        open(_private_log(config.log_file), "ab") if config.log_file else None  # noqa: SIM115
    )
    handed = handed_fuse_fd(config.mountpoint)
    try:
        return subprocess.Popen(
            argv,
            env=daemon_environment(os.environ),
            pass_fds=(ready_fd, config_read, *(() if handed is None else (handed,))),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_file if log_file is not None else subprocess.DEVNULL,
            cwd="/",
        )
    finally:
        os.close(config_read)
        if log_file is not None:
            log_file.close()


def _reap(child: subprocess.Popen[bytes]) -> int:
    """The child's exit status, killing its whole session if it does not exit soon."""
    try:
        return child.wait(timeout=_REAP_TIMEOUT)
    except subprocess.TimeoutExpired:
        _kill(child)
        try:
            return child.wait(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            return -signal.SIGKILL  # unkillable (blocked in the kernel): abandon it


def _kill(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's session (it is its own process group leader)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def _clean_mountpoint(mountpoint: str) -> None:
    """Detach whatever the failed daemon left mounted; the preflight found it empty."""
    if is_mounted(mountpoint):
        log.debug("detaching what the failed daemon left at %s", mountpoint)
        unmount(mountpoint, lazy=True)


def _describe_exit(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def mount_in_background(config: MountConfig, timeout: float = READY_TIMEOUT) -> None:
    """``zarrfuse mount``: return once the daemon's mount is live, else raise and clean up.

    Raises the preflight's error, the daemon's reported error (as ZarrFuseError), or
    MountError if the daemon crashed or did not report within ``timeout`` seconds.
    """
    preflight(config)
    config = with_default_log(config)
    read_fd, write_fd = os.pipe()
    try:
        child = _spawn(config, write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # only the child may hold the write end, or EOF never comes
    try:
        report = read_report(read_fd, time.monotonic() + timeout)
    except BaseException:  # Ctrl-C while waiting: take the half-made mount down with us
        _kill(child)
        _reap(child)
        _clean_mountpoint(config.mountpoint)
        raise
    finally:
        os.close(read_fd)
    _conclude(config, child, report, timeout)


def _conclude(
    config: MountConfig, child: subprocess.Popen[bytes], report: bytes | None, timeout: float
) -> None:
    """Act on the child's report: return if live, else stop it, clean up and raise."""
    if report == b"ok":
        return  # the daemon lives on in its own session; never waited for
    if report is None:
        _kill(child)
        _reap(child)
        _clean_mountpoint(config.mountpoint)
        raise MountError(
            f"the mount daemon did not report a live mount within {timeout:g} s; stopped it"
        )
    status = _reap(child)
    _clean_mountpoint(config.mountpoint)
    text = report.decode("utf-8", "replace")
    if text.startswith("error: "):
        raise ZarrFuseError(text.removeprefix("error: "))
    where = f"see {config.log_file}" if config.log_file else "see journalctl -t zarrfuse"
    raise MountError(
        f"the mount daemon {_describe_exit(status)} before the mount was live ({where})"
    )
