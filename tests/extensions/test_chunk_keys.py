"""Tests for zarrfuse.extensions.chunk_keys: the fanout and suffix encodings, strict decoding.

A mounted filesystem maps every path back to exactly one chunk (or to none), so these tests
pin down the spec tables, the configuration rules, the zarr entry-point integration, and that
only canonical keys decode.
"""

import json
import subprocess
import sys
import textwrap
from collections import defaultdict

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

from zarrfuse.errors import ChunkKeyError, ConfigurationError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    decode_chunk_key,
    encode_chunk_key,
    keys_per_directory,
    parse_encoding,
)

DEFAULT = DefaultChunkKeyEncoding()
DEFAULT_DOT = DefaultChunkKeyEncoding(separator=".")
V2 = V2ChunkKeyEncoding()
V2_SLASH = V2ChunkKeyEncoding(separator="/")
FANOUT = FanoutChunkKeyEncoding()
FANOUT_100 = FanoutChunkKeyEncoding(max_children=100)
SUFFIX_X = SuffixChunkKeyEncoding(suffix=".x")
SUFFIX_X_FANOUT = SuffixChunkKeyEncoding(suffix=".x", base_encoding=FANOUT)
SUFFIX_SHARD_V2 = SuffixChunkKeyEncoding(suffix=".shard.zip", base_encoding=V2)


def spec_fanout_key(coords, max_children):
    """The fanout key written straight from the spec's algorithm, as an independent oracle."""
    effective = 1
    while effective * 10 <= max_children:
        effective *= 10
    decimal_len = len(str(effective - 1))
    base = 10**decimal_len
    parts = ["c"]
    for coord in coords:
        chunks = []
        while True:
            coord, low = divmod(coord, base)
            chunks.insert(0, str(low).zfill(decimal_len))
            if coord == 0:
                break
        parts.append(str(len(chunks) - 1))
        parts.extend(chunks)
    return "/".join(parts)


# --------------------------------------------------------------------------- errors


def test_errors_are_value_errors():
    """Callers that catch ValueError (zarr, user code) must also catch zarrfuse's errors."""
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(ChunkKeyError, ValueError)


# --------------------------------------------------------------------------- default / v2


@pytest.mark.parametrize(
    ("encoding", "key", "ndim", "coords"),
    [
        (DEFAULT, "c", None, ()),
        (DEFAULT, "c", 0, ()),
        (DEFAULT, "c/0", None, (0,)),
        (DEFAULT, "c/1/23/45", None, (1, 23, 45)),
        (DEFAULT, "c/1/23/45", 3, (1, 23, 45)),
        (DEFAULT_DOT, "c", None, ()),
        (DEFAULT_DOT, "c.1.23.45", None, (1, 23, 45)),
        (DEFAULT_DOT, "c.1.23.45", 3, (1, 23, 45)),
        (V2, "1.23.45", None, (1, 23, 45)),
        (V2, "1.23.45", 3, (1, 23, 45)),
        (V2, "0", 0, ()),
        (V2, "0", None, (0,)),
        (V2, "0", 1, (0,)),
        (V2_SLASH, "1/23/45", None, (1, 23, 45)),
    ],
)
def test_default_and_v2_keys(encoding, key, ndim, coords):
    """zarr's encoder and zarrfuse's strict decoder agree on the spec's examples, both ways."""
    assert decode_chunk_key(encoding, key, ndim) == coords
    assert encode_chunk_key(encoding, coords) == key


# --------------------------------------------------------------------------- fanout config


@pytest.mark.parametrize(
    ("provided", "effective"),
    [
        (250, 100),  # spec table
        (1234, 1000),  # spec table
        (100, 100),
        (999, 100),
        (1000, 1000),
        (10000, 10000),
        (10**15 + 1, 10**15),
    ],
)
def test_fanout_effective_max_children(provided, effective):
    """The floored power of ten is what the encoding reports and serialises (spec table)."""
    enc = FanoutChunkKeyEncoding(max_children=provided)
    assert enc.max_children == effective
    assert enc.to_dict() == {"name": "fanout", "configuration": {"max_children": effective}}
    assert enc == FanoutChunkKeyEncoding(max_children=effective)
    parsed = parse_encoding({"name": "fanout", "configuration": {"max_children": provided}})
    assert parsed.max_children == effective
    assert parse_encoding(enc.to_dict()) == enc


def test_fanout_default_max_children():
    """Without configuration, max_children is 1000 (width-3 groups)."""
    assert FanoutChunkKeyEncoding().max_children == 1000
    assert parse_encoding("fanout").max_children == 1000
    assert parse_encoding({"name": "fanout"}).max_children == 1000
    assert FanoutChunkKeyEncoding().encode_chunk_key((12,)) == "c/0/012"


@pytest.mark.parametrize("value", [99, 10, 0, -1000, 1000.0, "1000", None, True, False])
def test_fanout_invalid_max_children(value):
    """Below 100, non-integers and bools are configuration errors, directly and from JSON."""
    with pytest.raises(ConfigurationError):
        FanoutChunkKeyEncoding(max_children=value)
    with pytest.raises(ConfigurationError):
        parse_encoding({"name": "fanout", "configuration": {"max_children": value}})


def test_fanout_unknown_configuration_member():
    """A misspelt fanout option must not be silently ignored."""
    with pytest.raises(ConfigurationError):
        parse_encoding({"name": "fanout", "configuration": {"max_childs": 100}})


# --------------------------------------------------------------------------- fanout keys


@pytest.mark.parametrize(
    ("max_children", "coords", "key"),
    [
        # the spec's example table (max_children = 1000)
        (1000, (), "c"),
        (1000, (0,), "c/0/000"),
        (1000, (12,), "c/0/012"),
        (1000, (1234, 5, 0, 6789012), "c/1/001/234/0/005/0/000/2/006/789/012"),
        # the spec's algorithm example
        (1000, (1234567,), "c/2/001/234/567"),
        # other widths; non-powers of ten behave like their floor
        (100, (0, 1), "c/0/00/0/01"),
        (250, (1234,), "c/1/12/34"),
        (1234, (1234,), "c/1/001/234"),
        (10000, (12345, 7), "c/1/0001/2345/0/0007"),
        (1000, (999, 1000), "c/0/999/1/001/000"),
    ],
)
def test_fanout_keys(max_children, coords, key):
    """Each row of the spec's table encodes to the listed key and decodes back."""
    enc = FanoutChunkKeyEncoding(max_children=max_children)
    assert enc.encode_chunk_key(coords) == key
    assert encode_chunk_key(enc, coords) == key
    assert decode_chunk_key(enc, key) == coords
    assert decode_chunk_key(enc, key, len(coords)) == coords


def test_fanout_spec_sequence_example():
    """Spec: coordinate 1234567 with max_children=1000 gives the sequence [2, 001, 234, 567]."""
    key = FANOUT.encode_chunk_key((1234567,))
    assert key.split("/")[1:] == ["2", "001", "234", "567"]


def test_fanout_through_zarr_create_array():
    """zarr resolves "fanout" by name, stores fanout keys and writes the effective max_children."""
    store = {}
    arr = zarr.create_array(
        store,
        shape=(3, 3),
        chunks=(1, 1),
        dtype="int32",
        chunk_key_encoding={"name": "fanout", "configuration": {"max_children": 250}},
    )
    arr[:] = np.arange(1, 10, dtype="int32").reshape(3, 3)
    chunk_keys = sorted(k for k in store if k != "zarr.json")
    expected = [f"c/0/{i:02d}/0/{j:02d}" for i in range(3) for j in range(3)]
    assert chunk_keys == expected
    assert "c/0/00/0/01" in store
    meta = json.loads(store["zarr.json"].to_bytes())
    assert meta["chunk_key_encoding"] == {
        "name": "fanout",
        "configuration": {"max_children": 100},
    }
    assert (arr[:] == np.arange(1, 10).reshape(3, 3)).all()


def test_fanout_no_directory_exceeds_max_children():
    """The point of fanout: a 12000-chunk axis with max_children=100 has no directory over 100."""
    children = defaultdict(set)
    keys = {FANOUT_100.encode_chunk_key((i,)) for i in range(12000)}
    assert len(keys) == 12000
    for key in keys:
        parts = key.split("/")
        for depth in range(1, len(parts)):
            children["/".join(parts[:depth])].add(parts[depth])
    assert max(len(c) for c in children.values()) == 100  # the bound is reached, not exceeded
    assert all(len(c) <= 100 for c in children.values())


# --------------------------------------------------------------------------- suffix config


def test_suffix_example_1_default_base():
    """Spec example 1: no base encoding means `default` with '/'."""
    enc = parse_encoding({"name": "suffix", "configuration": {"suffix": ".tiff"}})
    assert isinstance(enc, SuffixChunkKeyEncoding)
    assert enc.base_encoding == DefaultChunkKeyEncoding(separator="/")
    assert enc.encode_chunk_key((1, 2)) == "c/1/2.tiff"
    assert decode_chunk_key(enc, "c/1/2.tiff") == (1, 2)
    assert SuffixChunkKeyEncoding(suffix=".tiff").base_encoding == DEFAULT


def test_suffix_example_2_v2_base():
    """Spec example 2: `base-encoding` v2 with `.shard.zip`; written back as `base_encoding`."""
    enc = parse_encoding(
        {
            "name": "suffix",
            "configuration": {"suffix": ".shard.zip", "base-encoding": {"name": "v2"}},
        }
    )
    assert enc.base_encoding == V2
    assert enc.encode_chunk_key((1, 2)) == "1.2.shard.zip"
    assert decode_chunk_key(enc, "1.2.shard.zip") == (1, 2)
    config = enc.to_dict()["configuration"]
    assert "base-encoding" not in config
    assert config["base_encoding"]["name"] == "v2"
    assert parse_encoding(enc.to_dict()) == enc


@pytest.mark.parametrize("spelling", ["base_encoding", "base-encoding"])
def test_suffix_base_encoding_spellings(spelling):
    """Both spellings are read; `base_encoding` is what gets written."""
    base = {"name": "fanout", "configuration": {"max_children": 250}}
    enc = parse_encoding({"name": "suffix", "configuration": {"suffix": ".b", spelling: base}})
    assert enc.base_encoding == FanoutChunkKeyEncoding(max_children=100)
    assert enc.to_dict() == {
        "name": "suffix",
        "configuration": {
            "suffix": ".b",
            "base_encoding": {"name": "fanout", "configuration": {"max_children": 100}},
        },
    }


def test_suffix_base_encoding_shorthand_string():
    """`"base_encoding": "v2"` is accepted as the name alone."""
    config = {"suffix": ".z", "base_encoding": "v2"}
    enc = parse_encoding({"name": "suffix", "configuration": config})
    assert enc.base_encoding == V2
    assert enc.encode_chunk_key((3, 4)) == "3.4.z"


@pytest.mark.parametrize(
    "configuration",
    [
        pytest.param(
            {"suffix": ".x", "base_encoding": "v2", "base-encoding": "v2"}, id="both-spellings"
        ),
        pytest.param({"suffix": ".x", "separator": "/"}, id="unknown-member"),
        pytest.param({"base_encoding": "v2"}, id="missing-suffix"),
        pytest.param({}, id="empty"),
        pytest.param({"suffix": 5}, id="non-string-suffix"),
        pytest.param({"suffix": None}, id="none-suffix"),
        pytest.param({"suffix": ".x", "base_encoding": "nope"}, id="unknown-base"),
        pytest.param({"suffix": ".x", "base_encoding": 3}, id="base-not-object"),
        pytest.param(
            {
                "suffix": ".x",
                "base_encoding": {"name": "fanout", "configuration": {"max_children": 5}},
            },
            id="invalid-base-config",
        ),
    ],
)
def test_suffix_invalid_configuration(configuration):
    """Ambiguous, incomplete or unknown suffix configurations are refused."""
    with pytest.raises(ConfigurationError):
        parse_encoding({"name": "suffix", "configuration": configuration})


def test_suffix_without_configuration_object():
    """The suffix member is required, so a bare name cannot work."""
    with pytest.raises(ConfigurationError):
        parse_encoding({"name": "suffix"})
    with pytest.raises(ConfigurationError):
        parse_encoding("suffix")


@pytest.mark.parametrize(
    "suffix", ["/x", "x/", ".a/b", "\\x", ".a\\b", "\x00", ".x\x00", "..", "..x", ".tar..gz"]
)
def test_suffix_refuses_path_breaking_suffixes(suffix):
    """A suffix with '/', '\\', NUL or '..' could escape the array's directory or break a path."""
    with pytest.raises(ConfigurationError):
        SuffixChunkKeyEncoding(suffix=suffix)
    with pytest.raises(ConfigurationError):
        parse_encoding({"name": "suffix", "configuration": {"suffix": suffix}})


def test_suffix_over_fanout_keys():
    """The suffix is appended to the fanout key and stripped before fanout decoding."""
    assert SUFFIX_X_FANOUT.encode_chunk_key((1234, 5)) == "c/1/001/234/0/005.x"
    assert decode_chunk_key(SUFFIX_X_FANOUT, "c/1/001/234/0/005.x") == (1234, 5)
    assert decode_chunk_key(SUFFIX_X_FANOUT, "c.x", 0) == ()


def test_suffix_decoding_requires_the_suffix():
    """A key without the suffix is not a chunk of a suffix array."""
    with pytest.raises(ChunkKeyError):
        decode_chunk_key(SUFFIX_X, "c/1/2")
    with pytest.raises(ChunkKeyError):
        SUFFIX_SHARD_V2.decode_chunk_key("1.2.zip")


# --------------------------------------------------------------------------- strict decoding


@pytest.mark.parametrize(
    ("encoding", "key", "ndim"),
    [
        # default, '/'
        (DEFAULT, "", None),
        (DEFAULT, "c/", None),
        (DEFAULT, "c//1", None),
        (DEFAULT, "c/1/2/", None),
        (DEFAULT, "c/1//2", None),
        (DEFAULT, "/c/1", None),
        (DEFAULT, "c/01/2", None),
        (DEFAULT, "c/00", None),
        (DEFAULT, "c/-1/2", None),
        (DEFAULT, "c/+1/2", None),
        (DEFAULT, "c/ 1/2", None),
        (DEFAULT, "c/1 /2", None),
        (DEFAULT, "c/1/2\n", None),
        (DEFAULT, "c/1_0/2", None),
        (DEFAULT, "c/\u0661/2", None),  # Arabic-Indic digit one
        (DEFAULT, "c/\uff11/2", None),  # fullwidth digit one
        (DEFAULT, "c/\u00b2", None),  # superscript two
        (DEFAULT, "c/1e3", None),
        (DEFAULT, "d/1/2", None),
        (DEFAULT, "C/1/2", None),
        (DEFAULT, "c1/2", None),
        (DEFAULT, "c.1.2", None),
        (DEFAULT, "c/1.2", None),
        (DEFAULT, "c/1/2", 3),
        (DEFAULT, "c/1/2", 1),
        (DEFAULT, "c", 1),
        (DEFAULT, "c/0", 0),
        # default, '.'
        (DEFAULT_DOT, "c/1/2", None),
        (DEFAULT_DOT, "c..1", None),
        (DEFAULT_DOT, "c.1.", None),
        (DEFAULT_DOT, "c.01", None),
        (DEFAULT_DOT, "c.1.2", 1),
        # v2
        (V2, "", None),
        (V2, "01", None),
        (V2, "1..2", None),
        (V2, ".1", None),
        (V2, "1.", None),
        (V2, "-1", None),
        (V2, "+1", None),
        (V2, " 1", None),
        (V2, "1_0", None),
        (V2, "\u0661", None),
        (V2, "\uff11.2", None),
        (V2, "c.1.2", None),
        (V2, "1/2", None),
        (V2, "1.2", 3),
        (V2, "0", 2),
        (V2, "1", 0),
        (V2, "0.0", 0),
        # fanout, max_children 1000 (groups of 3)
        (FANOUT, "", None),
        (FANOUT, "c/", None),
        (FANOUT, "c/0", None),
        (FANOUT, "c/0/12", None),
        (FANOUT, "c/0/0012", None),
        (FANOUT, "c/0/5", None),
        (FANOUT, "c/1/001", None),
        (FANOUT, "c/2/001/234", None),
        (FANOUT, "c/0/001/234", None),
        (FANOUT, "c/1/000/005", None),
        (FANOUT, "c/2/000/001/234", None),
        (FANOUT, "c/00/012", None),
        (FANOUT, "c/01/001/234", None),
        (FANOUT, "c/0/012/", None),
        (FANOUT, "c//0/012", None),
        (FANOUT, "c/0//012", None),
        (FANOUT, "c/-0/012", None),
        (FANOUT, "c/+0/012", None),
        (FANOUT, "c/0/-12", None),
        (FANOUT, "c/0/+12", None),
        (FANOUT, "c/0/ 12", None),
        (FANOUT, "c/0/12 ", None),
        (FANOUT, "c/0/0_2", None),
        (FANOUT, "c/0/01\u0661", None),
        (FANOUT, "c/0/\uff1012", None),
        (FANOUT, "c/\u0660/012", None),
        (FANOUT, "d/0/012", None),
        (FANOUT, "c.0.012", None),
        (FANOUT, "c/0/012", 2),
        (FANOUT, "c/0/012/0/001", 1),
        (FANOUT, "c", 1),
        # fanout, max_children 100 (groups of 2)
        (FANOUT_100, "c/0/012", None),
        (FANOUT_100, "c/0/1", None),
        (FANOUT_100, "c/1/00/05", None),
        # suffix
        (SUFFIX_X, "c/1/2", None),
        (SUFFIX_X, "c/1/2.x.x", None),
        (SUFFIX_X, "c/1/2.xx", None),
        (SUFFIX_X, "c/01/2.x", None),
        (SUFFIX_X, ".x", None),
        (SUFFIX_X, "", None),
        (SUFFIX_X, "c/1/2.x", 1),
        (SUFFIX_X_FANOUT, "c/0/012", None),
        (SUFFIX_X_FANOUT, "c/0/012.x.x", None),
        (SUFFIX_X_FANOUT, "c/0/12.x", None),
        (SUFFIX_X_FANOUT, "c/1/000/005.x", None),
        (SUFFIX_X_FANOUT, "c/0/012.x", 2),
        (SUFFIX_SHARD_V2, "1.2", None),
        (SUFFIX_SHARD_V2, "1.2.shard.zip.shard.zip", None),
        (SUFFIX_SHARD_V2, "01.2.shard.zip", None),
    ],
)
def test_non_canonical_keys_are_refused(encoding, key, ndim):
    """Only the canonical key of a chunk decodes, so one file never aliases another."""
    with pytest.raises(ChunkKeyError):
        decode_chunk_key(encoding, key, ndim)


# --------------------------------------------------------------------------- negative coords


ALL_ENCODINGS = [DEFAULT, DEFAULT_DOT, V2, FANOUT, FANOUT_100, SUFFIX_X, SUFFIX_X_FANOUT]


@pytest.mark.parametrize("encoding", ALL_ENCODINGS, ids=repr)
@pytest.mark.parametrize("coords", [(-1,), (0, -5), (3, 4, -1)])
def test_negative_coordinates_are_refused(encoding, coords):
    """zarr's encoders happily write 'c/-1'; zarrfuse's encode refuses negatives."""
    with pytest.raises(ValueError):
        encode_chunk_key(encoding, coords)


@pytest.mark.parametrize(
    "encoding",
    [FanoutChunkKeyEncoding(), SuffixChunkKeyEncoding(suffix=".x"), SUFFIX_X_FANOUT],
    ids=repr,
)
def test_negative_coordinates_refused_by_plugin_methods(encoding):
    """The plugins' own encode_chunk_key (what zarr calls) refuses negatives too."""
    with pytest.raises(ValueError):
        encoding.encode_chunk_key((-1,))
    with pytest.raises(ValueError):
        encoding.encode_chunk_key((2, -1))


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


# --------------------------------------------------------------------------- properties


coordinate = st.one_of(st.integers(0, 2000), st.integers(0, 2**63))
coords_tuples = st.lists(coordinate, max_size=6).map(tuple)
max_children_values = st.integers(100, 10**15)
fanouts = max_children_values.map(lambda m: FanoutChunkKeyEncoding(max_children=m))
safe_suffixes = st.text(
    alphabet=st.characters(blacklist_characters="/\\\x00"), max_size=8
).filter(lambda s: ".." not in s)
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@PROPERTY_SETTINGS
@given(coords=coords_tuples, max_children=max_children_values)
def test_fanout_round_trip_property(coords, max_children):
    """Any coordinates and any max_children: the key follows the spec and decodes back."""
    enc = FanoutChunkKeyEncoding(max_children=max_children)
    key = encode_chunk_key(enc, coords)
    assert key == spec_fanout_key(coords, max_children)
    assert decode_chunk_key(enc, key) == coords
    assert decode_chunk_key(enc, key, len(coords)) == coords


@PROPERTY_SETTINGS
@given(coords=coords_tuples, separator=st.sampled_from(["/", "."]))
def test_default_and_v2_round_trip_property(coords, separator):
    """default decodes back with or without ndim; v2 decodes back when ndim is known."""
    default = DefaultChunkKeyEncoding(separator=separator)
    key = encode_chunk_key(default, coords)
    assert decode_chunk_key(default, key) == coords
    assert decode_chunk_key(default, key, len(coords)) == coords

    v2 = V2ChunkKeyEncoding(separator=separator)
    key = encode_chunk_key(v2, coords)
    assert decode_chunk_key(v2, key, len(coords)) == coords
    if coords:
        assert decode_chunk_key(v2, key) == coords


@PROPERTY_SETTINGS
@given(
    coords=coords_tuples,
    suffix=safe_suffixes,
    base=st.one_of(fanouts, st.just(DEFAULT), st.just(DEFAULT_DOT)),
)
def test_suffix_round_trip_property(coords, suffix, base):
    """A suffix over fanout or default appends exactly the suffix and decodes back."""
    enc = SuffixChunkKeyEncoding(suffix=suffix, base_encoding=base)
    key = encode_chunk_key(enc, coords)
    assert key == encode_chunk_key(base, coords) + suffix
    assert decode_chunk_key(enc, key) == coords
    assert decode_chunk_key(enc, key, len(coords)) == coords


@st.composite
def same_ndim_tuples(draw):
    ndim = draw(st.integers(0, 6))
    return draw(st.lists(st.tuples(*[coordinate] * ndim), min_size=2, max_size=12))


@PROPERTY_SETTINGS
@given(tuples=same_ndim_tuples(), enc=fanouts)
def test_fanout_keys_sort_like_coordinates(tuples, enc):
    """Fanout keys of the same ndim sort lexicographically in coordinate-tuple order."""
    keys = [enc.encode_chunk_key(t) for t in tuples]
    assert sorted(keys) == [enc.encode_chunk_key(t) for t in sorted(tuples)]


CANONICITY_ENCODINGS = [
    DEFAULT,
    DEFAULT_DOT,
    V2,
    V2_SLASH,
    FANOUT,
    FANOUT_100,
    SuffixChunkKeyEncoding(suffix="._", base_encoding=FANOUT_100),
    SuffixChunkKeyEncoding(suffix="0", base_encoding=DEFAULT),
    SuffixChunkKeyEncoding(suffix=".1", base_encoding=V2),
]
encodings_for_canonicity = st.sampled_from(CANONICITY_ENCODINGS)
optional_ndim = st.one_of(st.none(), st.integers(0, 6))


def assert_canonical_or_refused(encoding, key, ndim):
    """Decoding either raises ValueError or gives coordinates whose key is exactly `key`."""
    try:
        coords = decode_chunk_key(encoding, key, ndim)
    except ValueError:
        return
    if ndim is not None:
        assert len(coords) == ndim
    assert encode_chunk_key(encoding, coords) == key


@settings(max_examples=400, deadline=None)
@given(
    key=st.text(alphabet="c/0123456789._ -+", max_size=30),
    encoding=encodings_for_canonicity,
    ndim=optional_ndim,
)
def test_random_strings_decode_only_if_canonical(key, encoding, ndim):
    """No string other than the canonical key of some chunk may decode."""
    assert_canonical_or_refused(encoding, key, ndim)


MUTATION_ALPHABET = "c/0123456789._ -+x\u0661\uff11"


@st.composite
def mutated_keys(draw):
    encoding = draw(encodings_for_canonicity)
    coords = draw(st.lists(st.integers(0, 10**7), max_size=4).map(tuple))
    key = encode_chunk_key(encoding, coords)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        pos = draw(st.integers(0, len(key)))
        if kind == "insert":
            key = key[:pos] + draw(st.sampled_from(MUTATION_ALPHABET)) + key[pos:]
        elif kind == "delete" and key:
            pos = min(pos, len(key) - 1)
            key = key[:pos] + key[pos + 1 :]
        elif kind == "replace" and key:
            pos = min(pos, len(key) - 1)
            key = key[:pos] + draw(st.sampled_from(MUTATION_ALPHABET)) + key[pos + 1 :]
        else:
            end = draw(st.integers(pos, len(key)))
            key = key[:end] + key[pos:end] + key[end:]
    ndim = draw(st.one_of(st.none(), st.just(len(coords)), st.integers(0, 6)))
    return encoding, key, ndim


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated_keys())
def test_mutated_keys_decode_only_if_canonical(case):
    """Small edits of valid keys either stay canonical keys of some chunk or are refused."""
    encoding, key, ndim = case
    assert_canonical_or_refused(encoding, key, ndim)


# --- how many keys one store directory can hold ----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    grid=st.lists(st.integers(1, 12), min_size=0, max_size=3).map(tuple),
    which=st.sampled_from(["default/", "default.", "v2/", "v2.", "fanout", "suffix"]),
    max_children=st.sampled_from([100, 1000]),
)
def test_keys_per_directory_bounds_every_directory_of_the_grid(grid, which, max_children):
    """Encode every chunk of the grid and count keys per directory: the bound holds, and is
    reached (so it is not a loose guess)."""
    if which.startswith("default"):
        encoding = DefaultChunkKeyEncoding(separator="/" if which.endswith("/") else ".")
    elif which.startswith("v2"):
        encoding = V2ChunkKeyEncoding(separator="/" if which.endswith("/") else ".")
    elif which == "fanout":
        encoding = FanoutChunkKeyEncoding(max_children=max_children)
    else:
        encoding = SuffixChunkKeyEncoding(
            suffix=".tiff", base_encoding=FanoutChunkKeyEncoding(max_children=max_children)
        )
    per_directory: dict[str, int] = defaultdict(int)
    for coords in np.ndindex(*grid):
        directory = encode_chunk_key(encoding, tuple(int(c) for c in coords)).rpartition("/")[0]
        per_directory[directory] += 1
    bound = keys_per_directory(encoding, grid)
    assert max(per_directory.values()) <= bound
    if which[-1] in "/.":  # default and v2: the last dimension (or everything) in one
        assert max(per_directory.values()) == bound


def test_keys_per_directory_of_fanout_is_reached():
    encoding = FanoutChunkKeyEncoding(max_children=100)
    per_directory: dict[str, int] = defaultdict(int)
    for c in range(250):
        per_directory[encode_chunk_key(encoding, (c,)).rpartition("/")[0]] += 1
    assert max(per_directory.values()) == keys_per_directory(encoding, (250,)) == 100
