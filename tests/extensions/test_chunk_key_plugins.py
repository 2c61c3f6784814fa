"""zarr-python finds the fanout and suffix encodings through zarrfuse's entry points, with
no import of zarrfuse: the same arrays open in a plain zarr session."""

import json
import subprocess
import sys
import textwrap

# --------------------------------------------------------------------------- entry points


_ENTRY_POINT_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import numpy as np
    import zarr
    from zarr.storage import LocalStore

    mode, path = sys.argv[1], sys.argv[2]
    data = np.arange(1, 241, dtype="int32").reshape(12, 20)
    encoding = {
        "name": "suffix",
        "configuration": {
            "suffix": ".bin",
            "base_encoding": {"name": "fanout", "configuration": {"max_children": 100}},
        },
    }
    # The user code never imports zarrfuse; zarr must find it through the entry points.
    assert "zarrfuse" not in sys.modules, "zarrfuse imported before the zarr call"
    if mode == "write":
        arr = zarr.create_array(
            LocalStore(path), shape=data.shape, chunks=(1, 3), dtype="int32",
            chunk_key_encoding=encoding,
        )
        arr[:] = data
    arr = zarr.open_array(LocalStore(path), mode="r")
    assert (arr[:] == data).all()
    print(json.dumps({
        "encoding": arr.metadata.chunk_key_encoding.to_dict(),
        "loaded_by_zarr": "zarrfuse.extensions.chunk_keys" in sys.modules,
    }))
    """
)


def _run_entry_point_script(mode, path):
    proc = subprocess.run(
        [sys.executable, "-c", _ENTRY_POINT_SCRIPT, mode, str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_entry_points_let_plain_zarr_use_suffix_over_fanout(tmp_path):
    """Plain zarr (no zarrfuse import) creates and re-opens a suffix-over-fanout array."""
    path = tmp_path / "array.zarr"
    written = _run_entry_point_script("write", path)
    expected_encoding = {
        "name": "suffix",
        "configuration": {
            "suffix": ".bin",
            "base_encoding": {"name": "fanout", "configuration": {"max_children": 100}},
        },
    }
    assert written == {"encoding": expected_encoding, "loaded_by_zarr": True}
    assert (path / "c/0/11/0/06.bin").is_file()
    assert (path / "c/0/00/0/00.bin").is_file()
    stored = json.loads((path / "zarr.json").read_text())
    assert stored["chunk_key_encoding"] == expected_encoding
    # a second fresh interpreter only reads
    assert _run_entry_point_script("read", path) == written
