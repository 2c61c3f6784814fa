"""The built-in demo: an array that uses all three extensions, mounted and read back.

``zarrfuse demo [DIR]`` creates (once) a 2-D image array in DIR whose chunks are stored as two
parts (``concat-parts``: the pixels and a 4-byte crc32c), under ``suffix`` keys over a
``fanout`` tree; mounts it read-only; shows what a user sees; reads it back through the mount
with ordinary file I/O and with zarr; and unmounts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

import zarrfuse

__all__ = ["create_demo_array", "run"]

DEMO_SHAPE = (1200, 1500)
DEMO_CHUNKS = (100, 100)
DEMO_PARTS = [
    {
        "name": "concat-parts",
        "configuration": {"parts": [{"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]},
    }
]
DEMO_ENCODING = {
    "name": "suffix",
    "configuration": {
        "suffix": ".raw",
        "base_encoding": {"name": "fanout", "configuration": {"max_children": 100}},
    },
}


def demo_image() -> np.ndarray:
    """A recognisable picture: concentric rings over a diagonal gradient."""
    y, x = np.mgrid[0 : DEMO_SHAPE[0], 0 : DEMO_SHAPE[1]]
    rings = (np.hypot(y - 600, x - 750) // 40) % 2 * 100
    return ((x + y) * 255 // (sum(DEMO_SHAPE)) // 2 + rings).astype("uint8")


def create_demo_array(path: Path) -> zarr.Array:
    """Create the demo array at ``path`` unless it already exists; return it."""
    if (path / "zarr.json").exists():
        return zarrfuse.open_array(path)
    array = zarrfuse.create_array(
        path,
        shape=DEMO_SHAPE,
        chunks=DEMO_CHUNKS,
        dtype="uint8",
        serializer=BytesCodec(),
        compressors=[Crc32cCodec()],
        chunk_key_encoding=DEMO_ENCODING,
        storage_transformers=DEMO_PARTS,
        attributes={"description": "zarrfuse demo: rings over a gradient"},
    )
    array[:] = demo_image()
    return array


def _zarrfuse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zarrfuse", *args], capture_output=True, text=True, timeout=120
    )


def run(directory: str | None = None) -> int:
    """Create, mount, show, read back, unmount. Returns a process exit code."""
    root = Path(directory or os.path.join(tempfile.gettempdir(), "zarrfuse-demo")).absolute()
    store, mountpoint = root / "image.zarr", root / "mnt"
    mountpoint.mkdir(parents=True, exist_ok=True)
    array = create_demo_array(store)
    stored = sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
    print(f"demo array: {store}  shape={array.shape} chunks={array.chunks} dtype={array.dtype}")
    print(f"  {len(stored)} stored objects, for example:")
    for key in stored[:4]:
        print(f"    {key}")

    mounted = _zarrfuse("mount", str(store), str(mountpoint), "--read-only")
    if mounted.returncode != 0:
        print(mounted.stderr.strip(), file=sys.stderr)
        return 1
    try:
        files = sorted(p for p in mountpoint.rglob("*") if p.is_file())
        print(f"mounted at {mountpoint}: {len(files)} files, for example:")
        for path in files[:4]:
            print(f"    {path.relative_to(mountpoint)}  {path.stat().st_size} bytes")
        sample = mountpoint / "c/0/00/0/01.raw"
        raw = store / "c/0/00/0/01.raw"
        assert sample.read_bytes() == raw.read_bytes() + Path(f"{raw}.crc32c").read_bytes()
        print(f"  {sample.relative_to(mountpoint)} = parts {raw.name} + {raw.name}.crc32c")
        through = zarr.open_array(mountpoint, mode="r")
        same = bool(np.array_equal(through[:], demo_image()))
        print(f"  zarr.open_array({mountpoint}) equals the source: {same}")
        return 0 if same else 1
    finally:
        unmounted = _zarrfuse("umount", str(mountpoint))
        print(f"unmounted {mountpoint}" if unmounted.returncode == 0 else unmounted.stderr.strip())
