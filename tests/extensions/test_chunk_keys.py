"""Tests for zarrfuse.extensions.chunk_keys: the fanout and suffix encodings, their
configuration rules and the spec tables. Decoding, plugins and properties are in
test_chunk_key_decoding.py."""

import json
from collections import defaultdict

import numpy as np
import pytest
import zarr
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding

from tests.extensions.encodings import (
    DEFAULT,
    DEFAULT_DOT,
    FANOUT,
    FANOUT_100,
    SUFFIX_SHARD_V2,
    SUFFIX_X,
    SUFFIX_X_FANOUT,
    V2,
    V2_SLASH,
)
from zarrfuse.errors import ChunkKeyError, ConfigurationError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    decode_chunk_key,
    encode_chunk_key,
    last_name_tail,
    parse_encoding,
)

# --------------------------------------------------------------------------- errors


def test_errors_are_value_errors():
    """Callers that catch ValueError (zarr, user code) must also catch zarrfuse's errors."""
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(ChunkKeyError, ValueError)


# --------------------------------------------------------------------------- default / v2


@pytest.mark.parametrize(
    ("encoding", "tail"),
    [(DEFAULT, ""), (V2_SLASH, ""), (SuffixChunkKeyEncoding(suffix=".tiff"), ".tiff"),
     (SuffixChunkKeyEncoding(suffix=".a", base_encoding=SuffixChunkKeyEncoding(suffix=".b")),
      ".b.a"),
     (DEFAULT_DOT, None), (V2, None), (FANOUT, None), (SUFFIX_X_FANOUT, None),
     (SUFFIX_SHARD_V2, None)],
)
def test_last_name_tail_names_a_row_as_encoding_each_key_does(encoding, tail):
    """Where a tail is given, every key of a row is its first key's directory, then the last
    coordinate and the tail: what listings use instead of encoding each chunk's key."""
    assert last_name_tail(encoding) == tail
    if tail is None:
        return
    for done in [(), (0,), (7, 123)]:
        first = encode_chunk_key(encoding, (*done, 0)).rpartition("/")[0]
        for c in [0, 1, 9, 10, 999, 12345]:
            assert encode_chunk_key(encoding, (*done, c)) == f"{first}/{c}{tail}".lstrip("/")


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
