"""Write rules, rendered views and v2 sources, in process (issue 22 point 3): the
``FileSystem`` a mount serves, driven without a kernel (``tests/inprocess.py``)."""

from __future__ import annotations

import errno
import io

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image
from zarr.codecs import ZstdCodec

from tests.inprocess import in_process, refused
from tests.picture_paths import tile_path


@pytest.fixture
def array(tmp_path):
    data = np.arange(4 * 6, dtype="u1").reshape(4, 6)
    zarr.create_array(tmp_path / "a", data=data, chunks=(2, 3))
    return tmp_path / "a", data


@pytest.mark.expect_log(r"refused to store chunk")
def test_bytes_the_codecs_cannot_decode_are_refused_and_nothing_is_written(array):
    path, data = array
    before = (path / "c/0/0").read_bytes()
    with in_process(str(path)) as fs:
        with pytest.raises(OSError) as refused:
            fs.write("c/0/000/0/000", b"not zstd")
        assert refused.value.errno == errno.EIO
        assert fs.read("c/0/000/0/000") == before
    assert (path / "c/0/0").read_bytes() == before
    np.testing.assert_array_equal(zarr.open_array(path)[...], data)


@pytest.mark.expect_log(r"refused to store chunk")
def test_a_rendered_npy_written_back_lands_in_its_chunk(array):
    path, data = array
    with in_process(str(path), format="npy") as fs:
        assert fs.listdir("c/0/000/0") == ["000.npy", "001.npy"]
        shown = np.load(io.BytesIO(fs.read("c/0/001/0/001.npy")))
        np.testing.assert_array_equal(shown, data[2:4, 3:6])
        out = io.BytesIO()
        np.save(out, np.full((2, 3), 99, dtype="u1"))
        fs.write("c/0/001/0/001.npy", out.getvalue())
        with pytest.raises(OSError) as refused:  # a chunk of another shape
            out = io.BytesIO()
            np.save(out, np.zeros((3, 3), dtype="u1"))
            fs.write("c/0/000/0/000.npy", out.getvalue())
        assert refused.value.errno == errno.EINVAL
    expected = data.copy()
    expected[2:4, 3:6] = 99
    np.testing.assert_array_equal(zarr.open_array(path)[...], expected)


@pytest.mark.expect_log(r"open: the mount is read-only")
def test_a_v2_array_reads_as_its_chunks_and_a_read_only_view_refuses_writes(tmp_path):
    data = np.arange(30, dtype="<i4").reshape(5, 6)
    zarr.create_array(tmp_path / "v2", data=data, chunks=(5, 3), zarr_format=2,
                      compressors=None)
    with in_process(str(tmp_path / "v2"), read_only=True) as fs:
        assert "zarr.json" in fs.listdir("")
        raw = fs.read("c/0/000/0/001")
        np.testing.assert_array_equal(np.frombuffer(raw, "<i4").reshape(5, 3), data[:, 3:])
        with pytest.raises(OSError) as refused:
            fs.write("c/0/000/0/001", raw)
        assert refused.value.errno == errno.EROFS


def test_planes_of_a_sharded_array_read_and_write_in_place(tmp_path):
    """t, c, y, x in shards of 3 channels x 2 x 3 tiles: every plane file reads its pixels,
    and a saved plane changes exactly that plane of its shard."""
    data = np.random.default_rng(1).integers(0, 255, (2, 3, 64, 96), dtype="u1")
    zarr.create_array(tmp_path / "a", data=data, chunks=(1, 3, 32, 32),
                      shards=(1, 3, 64, 96), dimension_names=["t", "c", "y", "x"])
    leaf = "planes/t001/c002/y001"
    with in_process(str(tmp_path / "a"), format="png") as fs:
        assert fs.listdir("planes/t001") == ["c000", "c001", "c002"]
        assert fs.listdir(leaf) == [f"t001-c002-y001-x{x:03d}.png" for x in range(3)]
        shown = np.asarray(Image.open(io.BytesIO(fs.read(f"{leaf}/t001-c002-y001-x002.png"))))
        np.testing.assert_array_equal(shown, data[1, 2, 32:64, 64:96])
        png = io.BytesIO()
        Image.fromarray(np.full((32, 32), 7, dtype="u1")).save(png, format="PNG")
        fs.write(f"{leaf}/t001-c002-y001-x002.png", png.getvalue())
    expected = data.copy()
    expected[1, 2, 32:64, 64:96] = 7
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "a")[...], expected)


def tiff_of(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value, photometric="minisblack")
    return out.getvalue()


def test_a_tiff_written_back_changes_exactly_its_region(tmp_path):
    path = tmp_path / "arr"
    data = np.arange(25 * 33, dtype="int32").reshape(25, 33) - 400
    a = zarr.create_array(path, shape=data.shape, chunks=(10, 10), dtype="int32",
                          fill_value=-1, compressors=[ZstdCodec()])
    a[:20] = data[:20]  # rows 20..24 stay empty: fill value
    expected = a[:]
    with in_process(str(path), format="tiff") as fs:
        edited = tifffile.imread(io.BytesIO(fs.read(tile_path(1, 2, "tiff")))) * 2
        fs.write(tile_path(1, 2, "tiff"), tiff_of(edited))
        expected[10:20, 20:30] = edited
        # An edge chunk in the empty region, saved through a temp file and a rename.
        fs.write("planes/y002/.y002-x003.tiff.tmp", tiff_of(np.full((5, 3), 77, dtype="int32")))
        fs.rename("planes/y002/.y002-x003.tiff.tmp", tile_path(2, 3, "tiff"))
        expected[20:25, 30:33] = 77
        shown = tifffile.imread(io.BytesIO(fs.read(tile_path(1, 2, "tiff"))))
        np.testing.assert_array_equal(shown, edited)
    np.testing.assert_array_equal(zarr.open_array(path)[:], expected)


@pytest.mark.expect_log(r"refused to store chunk")
@pytest.mark.parametrize("fmt", ["tiff", "npy", "png"])
def test_refused_rendered_writes_change_nothing(tmp_path, fmt):
    path = tmp_path / "arr"
    a = zarr.create_array(path, shape=(20, 20), chunks=(10, 10), dtype="uint8")
    a[:] = np.random.default_rng(5).integers(0, 255, (20, 20), dtype="uint8")
    before = a[:]
    attempts = [b"not an image at all"]
    for value in [np.zeros((5, 10), "uint8"), np.zeros((10, 10), "uint16")]:  # shape, dtype
        out = io.BytesIO()
        if fmt == "tiff":
            tifffile.imwrite(out, value)
        elif fmt == "npy":
            np.save(out, value)
        else:
            Image.fromarray(value).save(out, format="PNG")
        attempts.append(out.getvalue())
    with in_process(str(path), format=fmt) as fs:
        target = f"c/0/000/0/001.{fmt}" if fmt == "npy" else tile_path(0, 1, fmt)
        for attempt in attempts:
            assert refused(lambda a=attempt: fs.write(target, a)) in (errno.EINVAL, errno.EIO)
        assert len(fs.read(target)) == fs.size(target)
    np.testing.assert_array_equal(zarr.open_array(path)[:], before)


@pytest.mark.expect_log(r"refused to store chunk")
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_strings_of_variable_length_are_fixed_width_npy_files_and_write_back(tmp_path,
                                                                               zarr_format):
    """Zarr v3's ``string`` and v2's vlen-utf8: each chunk's NPY is as wide as its longest
    value (its size, ``stat``'s, known before a read); a saved file of any width lands."""
    words = np.array([["a", "bbbb", "", "cc"], ["δδ", "e", "ffffff", "g"]], dtype=object)
    path = tmp_path / "s"
    array = zarr.create_array(path, shape=(2, 4), chunks=(2, 2), dtype=str,
                              zarr_format=zarr_format)
    array[...] = words
    with in_process(str(path), format="npy") as fs:
        names = sorted(fs.walk())
        files = [name for name in names if name.endswith(".npy")]
        assert len(files) == 2
        for column, file in enumerate(files):
            size = fs.size(file)
            shown = np.load(io.BytesIO(fs.read(file)))
            tile = words[:, 2 * column : 2 * column + 2]
            assert shown.dtype == f"<U{max(len(w) for w in tile.flat)}"
            assert shown.tolist() == tile.tolist() and size == len(fs.read(file))
        out = io.BytesIO()
        np.save(out, np.array([["longer than before", "h"], ["i", "j"]]))
        fs.write(files[1], out.getvalue())
        out = io.BytesIO()
        np.save(out, np.array([["one", "row"]]))
        assert refused(lambda: fs.write(files[0], out.getvalue())) == errno.EINVAL
    expected = words.copy()
    expected[:, 2:] = [["longer than before", "h"], ["i", "j"]]
    assert zarr.open_array(path)[...].tolist() == expected.tolist()
