"""``pip install zarrfuse`` without the mount extra: wheels only, no compiler, no libfuse.

The wheel is built as a user's pip gets it and installed into a fresh venv with
``--only-binary :all:``, so a dependency that would need compiling fails the install. There,
without pyfuse3 and trio: the extensions through plain zarr-python and the API read arrays
written both here and there, the commands that need no mount work, and the ones that mount
refuse in one line saying what to install, mounting nothing.

One venv for the module (about 20 s with pip's cache warm); pip may fetch dependencies from
PyPI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

import zarrfuse
from zarrfuse.fuse.mountpoint import is_mounted

# One worker runs them all (``scripts/dev``: --dist loadgroup): the wheel and its venv are
# module fixtures, built once per worker that runs any of them (8-9 s each).
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("packaging")]

REPO = Path(__file__).resolve().parent.parent
SHAPE, CHUNKS, DTYPE = (50, 70), (20, 25), "uint16"
ENCODING = {
    "name": "suffix",
    "configuration": {
        "suffix": ".zst",
        "base_encoding": {"name": "fanout", "configuration": {"max_children": 100}},
    },
}
PARTS = [
    {
        "name": "concat-parts",
        "configuration": {"parts": [{"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]},
    }
]


def _values() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 2**16, SHAPE, dtype=DTYPE)


# Run in the fresh venv (as a script, with paths as arguments): the same arrays as written
# here, one through zarrfuse and one through plain zarr, then every array read back.
WRITE_AND_READ_THERE = f"""
import importlib.util, sys
import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

assert importlib.util.find_spec("pyfuse3") is None, "pyfuse3 is installed"
assert importlib.util.find_spec("trio") is None, "trio is installed"
expected_path, parts_here, plain_here, parts_there, plain_there = sys.argv[1:]
expected = np.load(expected_path)
shape, chunks, dtype = {SHAPE!r}, {CHUNKS!r}, {DTYPE!r}
encoding, parts = {ENCODING!r}, {PARTS!r}

# Plain zarr first, before anything imports zarrfuse: the entry points alone find the
# fanout and suffix encodings.
plain = zarr.create_array(plain_there, shape=shape, chunks=chunks, dtype=dtype,
                          chunk_key_encoding=encoding)
plain[:] = expected
for path in (plain_here, plain_there):
    assert np.array_equal(zarr.open_array(path, mode="r")[:], expected), path

import zarrfuse
written = zarrfuse.create_array(parts_there, shape=shape, chunks=chunks, dtype=dtype,
                                compressors=[ZstdCodec(), Crc32cCodec()],
                                chunk_key_encoding=encoding, storage_transformers=parts)
written[:] = expected
for path in (parts_here, parts_there, plain_here):
    array = zarrfuse.open_array(path)
    assert array.dtype == expected.dtype and np.array_equal(array[:], expected), path
print(zarrfuse.__file__)
"""


def _without_the_checkout() -> dict[str, str]:
    """Our environment minus what would make the fresh venv see this checkout or our venv."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def _run(
    argv: Sequence[str | Path], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_without_the_checkout(), capture_output=True,
        text=True, timeout=timeout, check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of what the Dockerfile copies too.

    A copy, because setuptools leaves ``build/`` and ``*.egg-info`` in the tree it builds,
    and a stale ``build/lib`` would put files deleted since into the wheel.
    """
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(
        REPO / "zarrfuse", src / "zarrfuse", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, src]
    _ok(_run(build, cwd=src))
    (found,) = out.glob("zarrfuse-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site packages) with the wheel and no extra, from wheels only.

    Installed by our own pip through ``--python``: the venv needs no pip of its own, which
    halves the time ensurepip and an old bundled pip would take.
    """
    path = tmp_path_factory.mktemp("venv")
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path))
    _ok(_run(
        [sys.executable, "-m", "pip", "--python", path / "bin" / "python", "install", "--quiet",
         "--only-binary", ":all:", wheel],
        cwd=path, timeout=540,
    ))
    return path


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The arrays written here (our venv, this checkout), and the values they hold."""
    root = tmp_path_factory.mktemp("arrays")
    np.save(root / "expected.npy", _values())
    here = zarrfuse.create_array(
        root / "parts_here.zarr", shape=SHAPE, chunks=CHUNKS, dtype=DTYPE,
        compressors=[ZstdCodec(), Crc32cCodec()], chunk_key_encoding=ENCODING,
        storage_transformers=PARTS,
    )
    here[:] = _values()
    plain = zarr.create_array(
        root / "plain_here.zarr", shape=SHAPE, chunks=CHUNKS, dtype=DTYPE,
        chunk_key_encoding=ENCODING,
    )
    plain[:] = _values()
    return {
        "root": root,
        "expected": root / "expected.npy",
        "parts_here": root / "parts_here.zarr",
        "plain_here": root / "plain_here.zarr",
        "parts_there": root / "parts_there.zarr",
        "plain_there": root / "plain_there.zarr",
    }


@pytest.fixture(scope="module")
def written_there(venv: Path, arrays: dict[str, Path]) -> dict[str, Path]:
    """Run WRITE_AND_READ_THERE once; the arrays, those written there included."""
    out = _ok(_run(
        [venv / "bin" / "python", "-c", WRITE_AND_READ_THERE, arrays["expected"],
         arrays["parts_here"], arrays["plain_here"], arrays["parts_there"],
         arrays["plain_there"]],
        cwd=arrays["root"],
    ))
    # The installed wheel answered, not this checkout.
    assert Path(out.strip()).is_relative_to(venv), out
    return arrays


def _stored_keys(array: Path) -> list[str]:
    return sorted(str(p.relative_to(array)) for p in array.rglob("*") if p.is_file())


def test_the_wheel_installs_without_the_mount_extra_and_reads_arrays(written_there):
    """Both ways: arrays written there read here too, stored under the same keys."""
    expected = _values()
    for name in ("parts_here", "parts_there"):
        assert np.array_equal(zarrfuse.open_array(written_there[name])[:], expected), name
    assert np.array_equal(zarr.open_array(written_there["plain_there"], mode="r")[:], expected)
    parts_keys = _stored_keys(written_there["parts_there"])
    assert parts_keys == _stored_keys(written_there["parts_here"])
    assert "c/0/00/0/00.zst" in parts_keys and "c/0/00/0/00.zst.crc32c" in parts_keys
    assert _stored_keys(written_there["plain_there"]) == _stored_keys(written_there["plain_here"])


def test_commands_that_need_no_mount_work_there(venv, written_there):
    cwd = written_there["root"]

    def there(*argv: str | Path) -> str:
        return _ok(_run([venv / "bin" / "zarrfuse", *argv], cwd))

    assert there("--version").strip() == f"zarrfuse {zarrfuse.__version__}"
    info = there("info", written_there["parts_here"])
    assert "concat-parts" in info and '"fanout"' in info
    assert "0 failed" in there("verify", written_there["parts_here"])
    tiff = cwd / "tiff.zarr"
    there("convert-tiff", written_there["plain_here"], tiff, "--tile", "16,16")
    assert "dual-access (shards are TIFF files): yes" in there("info", tiff)
    there("repair-tiff", "--check", tiff)


@pytest.mark.parametrize(
    "argv",
    [
        ["zarrfuse", "mount", "{source}", "{mnt}"],
        ["zarrfuse", "mount", "{source}", "{mnt}", "--foreground"],
        ["zarrfuse", "{source}", "{mnt}", "-o", "ro"],  # mount.fuse3's call, from fstab
        ["mount.fuse.zarrfuse", "{source}", "{mnt}", "-o", "ro"],  # mount(8)'s helper
        ["zarrfuse", "demo", "{mnt}"],
        ["zarrfuse", "stats", "{mnt}"],
    ],
    ids=["mount", "foreground", "fstab", "mount-helper", "demo", "stats"],
)
def test_commands_that_mount_say_what_to_install(argv, venv, written_there, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    command = [a.format(source=written_there["parts_here"], mnt=mnt) for a in argv]
    result = _run([venv / "bin" / command[0], *command[1:]], cwd=tmp_path, timeout=60)
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{command[0]}: mounting needs the mount extra: ")
    assert 'pip install "zarrfuse[mount]"' in lines[0]
    assert not is_mounted(str(mnt))
    assert list(mnt.iterdir()) == []  # demo stopped before making its array there
