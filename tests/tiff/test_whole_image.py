"""The whole-image OME-TIFF layout: files materialised from it and read by real readers
(tifffile, libtiff, vips, GDAL, OpenSlide, Pillow), header ranges, spans, and the 100k x 100k
header served in well under a second."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import tifffile

from tests.tiff import whole_image_readers as readers
from zarrfuse.errors import ConfigurationError
from zarrfuse.tiff.ome_xml import NAMESPACE, image_description, ome_xml
from zarrfuse.tiff.whole_image import (
    MAX_TILE_SIDE,
    ImageLevel,
    TileSpan,
    WholeImagePlan,
    image_dtype_check,
    tile_size_for,
)

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    dtype: str
    tile: tuple[int, int]
    samples: int = 1
    roles: tuple[str | None, ...] = ()
    axes: str | None = None  # tifffile's series axes
    pyramid: int = 1  # levels, each half the last
    bigtiff: bool | None = None
    readers: frozenset[str] = field(default_factory=frozenset)
    openslide: str | None = None  # what OpenSlide says when it refuses


TWO_D = frozenset({"gdal", "openslide"})
# Tiles whose byte size is not a multiple of 1024: libtiff read without mmap (OpenSlide's own
# I/O) rounds its tile buffer up to 1024 bytes and then refuses the uncompressed tile.
ODD_TILE = "Invalid tile byte count for tile"
CASES = {
    "2d-uint8": Case((100, 130), "uint8", (32, 48), axes="YX", readers=TWO_D | {"pillow"},
                     openslide=ODD_TILE),
    "2d-uint16": Case((100, 130), "uint16", (32, 48), axes="YX", readers=TWO_D | {"pillow"}),
    "2d-float32": Case((70, 90), "float32", (32, 32), axes="YX", readers=TWO_D,
                       openslide="Sorry, can not handle"),
    "2d-int16": Case((70, 90), "int16", (16, 32), axes="YX", readers=TWO_D),
    "rgb-uint8": Case((100, 130, 3), "uint8", (32, 32), samples=3, axes="YXS", readers=TWO_D),
    "rgba-uint8": Case((70, 90, 4), "uint8", (32, 32), samples=4, axes="YXS", readers=TWO_D),
    "3d-uint16": Case((4, 70, 90), "uint16", (32, 32), roles=(None,), axes="ZYX"),
    "5d-tczyx": Case((2, 3, 4, 40, 50), "uint16", (16, 32), roles=("t", "c", "z"),
                     axes="TCZYX"),
    # chunks of 20 x 45: tiles of tile_size_for(20) x tile_size_for(45) = 32 x 64, a
    # multiple of 1024 bytes, so OpenSlide opens it too
    "chunks-20x45-rgb": Case((50, 70, 3), "uint8", (tile_size_for(20), tile_size_for(45)),
                             samples=3, axes="YXS", readers=TWO_D),
    "pyramid-3-levels": Case((256, 300, 3), "uint8", (64, 64), samples=3, axes="YXS",
                             pyramid=3, readers=TWO_D),
    "pyramid-stack": Case((2, 96, 80), "uint16", (32, 32), roles=("c",), axes="CYX",
                          pyramid=3),
    "bigtiff-forced": Case((3, 40, 50), "uint16", (16, 16), roles=("z",), axes="ZYX",
                           bigtiff=True),
}


def level_arrays(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(case.dtype)
    if dtype.kind == "f":
        data = rng.normal(size=case.shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, case.shape, dtype=dtype, endpoint=True)
    if case.samples == 4:
        data[..., 3] = np.where(rng.random(case.shape[:-1]) < 0.5, 255, data[..., 3])
    levels = [data]
    plane = 2 if case.samples == 1 else 3
    for _ in range(case.pyramid - 1):
        step = (slice(None),) * (data.ndim - plane) + (slice(None, None, 2),) * 2
        levels.append(np.ascontiguousarray(levels[-1][step]))
    return levels


def shard_format_for(case: Case, levels: list[np.ndarray]) -> WholeImagePlan:
    plane = 2 if case.samples == 1 else 3
    lead = levels[0].shape[: levels[0].ndim - plane]
    y, x = levels[0].shape[len(lead) : len(lead) + 2]
    description = image_description(
        shape=levels[0].shape, dtype=levels[0].dtype, name="zarrfuse test", roles=case.roles,
        sizes=lead, y=y, x=x, samples=case.samples)
    tiles = [case.tile] + [(16, 16)] * (len(levels) - 1)
    return WholeImagePlan(
        [ImageLevel(a.shape, t) for a, t in zip(levels, tiles, strict=True)],
        levels[0].dtype, samples=case.samples, description=description, bigtiff=case.bigtiff)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[Path, list[np.ndarray], WholeImagePlan]]:
    root = tmp_path_factory.mktemp("whole-image")
    made = {}
    for name, case in CASES.items():
        levels = level_arrays(case)
        layout = shard_format_for(case, levels)
        readers.materialise(layout, levels, root / f"{name}.ome.tif")
        made[name] = (root / f"{name}.ome.tif", levels, layout)
    return made


@pytest.mark.parametrize("name", CASES)
def test_tifffile(files, name):
    path, levels, _ = files[name]
    readers.check_tifffile(path, levels, axes=CASES[name].axes)
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff == (CASES[name].bigtiff is True)
        series = tif.series[0]
        assert [level.keyframe.subfiletype for level in series.levels] == [0] + [1] * (
            len(levels) - 1)
        assert len(tif.pages[0].subifds or ()) == len(levels) - 1


@pytest.mark.parametrize("name", CASES)
def test_libtiff(files, name, tmp_path):
    path, levels, _ = files[name]
    readers.check_libtiff(path, levels, tmp_path, samples=CASES[name].samples)


@pytest.mark.expect_log(r"OME series")
@pytest.mark.parametrize("name", CASES)
def test_vips(files, name, tmp_path):
    path, levels, _ = files[name]
    readers.check_vips(path, levels, tmp_path, samples=CASES[name].samples)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "gdal" in c.readers])
def test_gdal(files, name, tmp_path):
    path, levels, _ = files[name]
    case = CASES[name]
    readers.check_gdal(path, levels, tmp_path, samples=case.samples, tile=case.tile)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "openslide" in c.readers])
def test_openslide(files, name):
    """OpenSlide reads or refuses as :data:`CASES` says (a change of either shows here)."""
    path, levels, _ = files[name]
    case = CASES[name]
    if case.openslide is None:
        readers.check_openslide(path, levels, samples=case.samples, tile_width=case.tile[1])
    else:
        import openslide  # noqa: PLC0415  (slow to load; only this test uses it directly)

        with pytest.raises(openslide.OpenSlideError, match=case.openslide):
            readers.openslide_pixels(path)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "pillow" in c.readers])
def test_pillow(files, name):
    path, levels, _ = files[name]
    readers.check_pillow(path, levels)


# --- the layout itself ------------------------------------------------------------------


def test_header_ranges_equal_slices_of_the_whole_header(files):
    """Any byte range (across page blocks, SubIFDs, padding) is that slice of the header."""
    _, _, layout = files["pyramid-stack"]
    whole = layout.header_bytes(0, layout.data_start)
    assert len(whole) == layout.data_start
    rng = np.random.default_rng(3)
    for _ in range(200):
        start, stop = sorted(int(v) for v in rng.integers(0, layout.data_start + 1, 2))
        assert layout.header_bytes(start, stop) == whole[start:stop]
    with pytest.raises(ValueError):
        layout.header_bytes(0, layout.data_start + 1)


def test_spans_cover_a_range_over_tiles_levels_and_pages(files):
    _, _, layout = files["pyramid-stack"]
    n0, n1 = layout.tile_nbytes(0), layout.tile_nbytes(1)
    start = layout.tile_offset(0, 0, 2, 2) + 5  # the last level-0 tile of page 0
    stop = layout.tile_offset(1, 0, 0, 1) + 7
    assert layout.spans(start, stop) == [
        TileSpan(0, 0, 2, 2, 5, n0), TileSpan(1, 0, 0, 0, 0, n1), TileSpan(1, 0, 0, 1, 0, 7)]
    last = layout.tile_offset(2, 1, 1, 1)
    assert layout.spans(last, layout.size) == [TileSpan(2, 1, 1, 1, 0, layout.tile_nbytes(2))]
    assert layout.spans(start, start) == []
    with pytest.raises(ValueError):
        layout.spans(layout.data_start - 1, layout.data_start + 1)


def test_tile_regions_are_cropped_at_the_edges():
    layout = WholeImagePlan([ImageLevel((2, 3, 40, 50, 3), (32, 32))], np.dtype("uint8"),
                              samples=3, description="")
    assert layout.pages == 6 and layout.leading_shape == (2, 3)
    assert layout.tile_grid(0) == (2, 2)
    assert layout.tile_region(0, 5, 1, 1) == (1, 2, slice(32, 40), slice(32, 50), slice(None))


def test_classic_tiff_while_the_file_fits_in_4_gib():
    def layout(side: int, **kw) -> WholeImagePlan:
        return WholeImagePlan([ImageLevel((side, side), (256, 256))], np.dtype("uint8"),
                                samples=1, description="", **kw)

    assert not layout(65_280).flavour.bigtiff  # 255 x 255 tiles: 4.18e9 bytes
    assert layout(65_536).flavour.bigtiff  # 256 x 256 tiles: 2**32 bytes of tiles
    with pytest.raises(ConfigurationError, match="classic TIFF"):
        layout(65_536, bigtiff=False)
    assert layout(64, bigtiff=True).flavour.bigtiff


def test_the_100k_square_header_is_where_tifffile_finds_every_tile(tmp_path):
    """100,000 x 100,000 uint16 in 256 x 256 tiles (152,881 tiles, a 20 GB BigTIFF): the
    layout and its whole header, read by tifffile from a sparse file, put the last tile
    where the layout does. How fast (< 1 s, target 100 ms): ``python -m bench run whole-image``."""
    description = ome_xml(name="big", roles=[], sizes=[], y=100_000, x=100_000,
                          dtype="uint16")
    layout = WholeImagePlan([ImageLevel((100_000, 100_000), (256, 256))],
                              np.dtype("uint16"), samples=1, description=description)
    header = layout.header_bytes(0, layout.data_start)
    middle = layout.header_bytes(layout.data_start // 2, layout.data_start // 2 + 4096)
    assert middle == header[layout.data_start // 2 : layout.data_start // 2 + 4096]
    assert layout.tile_grid(0) == (391, 391) and layout.flavour.bigtiff
    path = tmp_path / "big.ome.tif"
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(layout.size)
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome and tif.series[0].shape == (100_000, 100_000)
        page = tif.pages[0]
        assert len(page.dataoffsets) == 391 * 391
        assert page.dataoffsets[-1] == layout.tile_offset(0, 0, 390, 390)
        assert page.dataoffsets[-1] + page.databytecounts[-1] == layout.size


# --- rules and refusals -----------------------------------------------------------------


def test_tile_size_for_keeps_chunks_on_the_16_grid_and_rounds_others_up_to_32():
    assert [tile_size_for(n) for n in (1, 16, 17, 20, 45, 48, 256, 1000)] == [
        32, 16, 32, 32, 64, 48, 256, 1024]
    assert tile_size_for(100_000) == MAX_TILE_SIDE


@pytest.mark.parametrize("dtype", ["bool", "complex64", "U4", "S3", "O", "i4,f4", "M8[s]"])
def test_unsupported_dtypes_are_refused(dtype):
    with pytest.raises(ConfigurationError, match="cannot be shown as TIFF"):
        image_dtype_check(np.dtype(dtype))


@pytest.mark.parametrize("dtype", ["uint64", "int64", "float16"])
def test_types_without_an_ome_type_get_a_shaped_description(tmp_path, dtype):
    """OME (and tifffile's OME writer) has no uint64, int64 or float16: the file is a plain
    tiled TIFF whose shaped description keeps the N-D shape for tifffile."""
    case = Case((3, 40, 50), dtype, (16, 32), roles=("z",))
    levels = level_arrays(case)
    with pytest.raises(ConfigurationError, match="no OME pixel type"):
        ome_xml(name="x", roles=["z"], sizes=[3], y=40, x=50, dtype=dtype)
    readers.materialise(shard_format_for(case, levels), levels, tmp_path / "plain.tif")
    readers.check_tifffile(tmp_path / "plain.tif", levels, axes=None, ome=False)


def test_samples_and_shapes_are_checked():
    with pytest.raises(ConfigurationError, match="samples"):
        WholeImagePlan([ImageLevel((4, 4, 2), (16, 16))], np.dtype("u1"), samples=2,
                         description="")
    with pytest.raises(ConfigurationError, match="multiples of 16"):
        WholeImagePlan([ImageLevel((40, 40), (20, 16))], np.dtype("u1"), samples=1,
                         description="")
    with pytest.raises(ConfigurationError, match="leading dims differ"):
        WholeImagePlan([ImageLevel((2, 40, 40), (16, 16)), ImageLevel((3, 20, 20), (16, 16))],
                         np.dtype("u1"), samples=1, description="")


# --- OME-XML ----------------------------------------------------------------------------


def _pixels(xml: str) -> ET.Element:
    root = ET.fromstring(xml.encode())
    assert root.tag == f"{{{NAMESPACE}}}OME"
    pixels = root.find(f"{{{NAMESPACE}}}Image/{{{NAMESPACE}}}Pixels")
    assert pixels is not None
    return pixels


@pytest.mark.parametrize(("roles", "sizes", "order", "zct"), [
    ([], [], "XYZCT", (1, 1, 1)),
    ([None], [4], "XYZCT", (4, 1, 1)),
    (["t", "c", "z"], [2, 3, 4], "XYZCT", (4, 3, 2)),
    (["z", "c"], [2, 3], "XYCZT", (2, 3, 1)),
    (["c", None], [2, 3], "XYZCT", (3, 2, 1)),  # the unknown takes Z, the first free role
    (["t"], [5], "XYTZC", (1, 1, 5)),
    ([None] * 4, [2, 3, 4, 5], "XYZCT", (5, 4, 6)),  # outer two fold into T
])
def test_dimension_order_follows_the_pages(roles, sizes, order, zct):
    pixels = _pixels(ome_xml(name="n", roles=roles, sizes=sizes, y=8, x=9, dtype="uint8"))
    # Where the dims of size 1 go in DimensionOrder changes no plane's place (tifffile's
    # OmeXml puts them its own way); the order of the others is what readers index by.
    moving = dict(zip("ZCT", zct, strict=True))

    def ordered(text: str) -> str:
        return text[:2] + "".join(d for d in text[2:] if moving[d] > 1)

    assert ordered(pixels.get("DimensionOrder") or "") == ordered(order)
    assert sorted(pixels.get("DimensionOrder") or "") == sorted("XYZCT")
    assert (int(pixels.get("SizeZ")), int(pixels.get("SizeC")), int(pixels.get("SizeT"))) == zct
    tiffdata = pixels.find(f"{{{NAMESPACE}}}TiffData")
    assert tiffdata is not None and tiffdata.get("PlaneCount") == str(int(np.prod(sizes)))


def test_rgb_channels_physical_sizes_and_names():
    xml = ome_xml(name="a & b", roles=["c"], sizes=[2], y=8, x=9, samples=3, dtype="uint8",
                  physical_sizes={"x": (0.25, "µm"), "y": (0.5, "µm"), "z": (1, "furlong"),
                                  "t": (2.5, "s")},
                  channel_names=["dapi", "gfp"])
    pixels = _pixels(xml)
    assert pixels.get("SizeC") == "6" and pixels.get("Interleaved") == "true"
    channels = pixels.findall(f"{{{NAMESPACE}}}Channel")
    assert [(c.get("Name"), c.get("SamplesPerPixel")) for c in channels] == [
        ("dapi", "3"), ("gfp", "3")]
    assert pixels.get("PhysicalSizeX") == "0.25" and pixels.get("PhysicalSizeXUnit") == "µm"
    assert pixels.get("PhysicalSizeZ") is None  # no OME unit: left out, not read as µm
    assert pixels.get("TimeIncrement") == "2.5" and pixels.get("TimeIncrementUnit") == "s"


def test_repeated_roles_are_refused():
    with pytest.raises(ConfigurationError, match="none twice"):
        ome_xml(name="n", roles=["c", "c"], sizes=[2, 2], y=8, x=9, dtype="uint8")


def test_the_ome_xml_is_the_same_bytes_on_every_mount():
    """tifffile's OmeXml gives each document a random UUID; ours is derived from what the
    document describes, so the file's bytes (and size) never change between mounts."""
    args = {"name": "n", "roles": ["c"], "sizes": [2], "y": 8, "x": 9, "dtype": "uint16"}
    first, again = ome_xml(**args), ome_xml(**args)
    assert first == again and 'Creator="zarrfuse"' in first
    assert ome_xml(**{**args, "name": "m"}).split("UUID=")[1] != first.split("UUID=")[1]
