"""zarr-python in a process where zarrfuse's plugins are not installed.

A reader that knows only what zarr-python itself knows: a separate venv with the same zarr
and numcodecs versions as this one and nothing of zarrfuse (no ``fanout``/``suffix`` entry
points). It is built once under a cache directory keyed by those versions and reused; a
half-built venv is never reused (it is built beside and renamed into place). Reads run in a
subprocess with a timeout and come back as ``.npy`` files.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from tests.conformance.results import ReaderError

CACHE_ROOT = Path(os.environ.get("ZARRFUSE_TEST_CACHE", Path.home() / ".cache" / "zarrfuse-tests"))
BUILD_TIMEOUT = 600.0

# Runs in the plain venv as a server, one request a line on stdin: {"root", "out", "paths"}.
# Reads each path (an array at the root, or an array in the group at the root, through its
# consolidated metadata when it has one) and saves it as <n>.npy, or the error's type and
# message as <n>.err, then answers "done". One process for the session: zarr's import alone
# costs seconds on a busy machine. The plugins check makes a wrong venv fail loudly.
READER_SCRIPT = """
import json, sys
from importlib.metadata import entry_points
import numpy as np
import zarr
assert not list(entry_points(group="zarr.chunk_key_encoding")), "zarrfuse plugins present"
print("ready", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    for n, path in enumerate(request["paths"]):
        try:
            root = request["root"]
            node = zarr.open_array(root, mode="r") if path == "" else zarr.open_group(
                root, mode="r")[path]
            np.save(f"{request['out']}/{n}.npy", node[...], allow_pickle=False)
        except Exception as e:
            with open(f"{request['out']}/{n}.err", "w") as f:
                f.write(f"{type(e).__name__}: {e}")
    print("done", flush=True)
"""


def plain_venv_dir() -> Path:
    """Where the venv for this zarr and numcodecs version lives (built or not)."""
    return CACHE_ROOT / f"plain-zarr-{version('zarr')}-numcodecs-{version('numcodecs')}"


def build_plain_venv() -> tuple[Path, float]:
    """The plain venv's python, building it if missing; and the seconds building took (0 if
    reused)."""
    target = plain_venv_dir()
    python = target / "bin" / "python"
    if python.exists():
        return python, 0.0
    start = time.monotonic()
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=CACHE_ROOT))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(building)], check=True,
                       timeout=BUILD_TIMEOUT, capture_output=True)
        subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"zarr=={version('zarr')}",
             f"numcodecs=={version('numcodecs')}"],
            check=True, timeout=BUILD_TIMEOUT, capture_output=True,
        )
        # Only bin/python (a symlink to the base interpreter) and `python -m` are used, so the
        # venv works after the rename that makes it visible whole or not at all.
        try:
            building.rename(target)
        except OSError:  # another test worker built it meanwhile: use theirs
            if not python.exists():
                raise
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return python, time.monotonic() - start


class PlainZarr:
    """The plain venv's reader process; ``read`` sends it one data set at a time."""

    def __init__(self, python: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            # -I: no PYTHON* variables and not the working directory on sys.path, whose
            # zarrfuse.egg-info (a checkout's) would register the plugins after all.
            [str(python), "-I", "-c", READER_SCRIPT], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True, start_new_session=True,
        )
        self._expect("ready")

    def _expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != word:
            self.close()
            raise RuntimeError(f"plain zarr reader: wanted {word!r} within {self.timeout:g} s, "
                               f"got {line!r} (exit {self.proc.poll()})")

    def read(self, root: Path, paths: list[str]) -> dict[str, np.ndarray | ReaderError]:
        """Each path under ``root`` as plain zarr-python reads it, or the error it raised."""
        assert self.proc.stdin is not None
        with tempfile.TemporaryDirectory() as out:
            request = {"root": str(root), "out": out, "paths": paths}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            self._expect("done")
            results: dict[str, np.ndarray | ReaderError] = {}
            for n, path in enumerate(paths):
                err = Path(out, f"{n}.err")
                if err.exists():
                    results[path] = ReaderError(err.read_text())
                else:
                    results[path] = np.load(Path(out, f"{n}.npy"), allow_pickle=False)
            return results

    def close(self) -> None:
        """Stop the process (it is ours: killed by its own pid)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
