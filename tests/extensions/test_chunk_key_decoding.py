"""Tests for zarrfuse.extensions.chunk_keys: only canonical keys decode, negative
coordinates, the zarr entry-point integration, properties over every encoding, and how many
keys one store directory can hold.

A mounted filesystem maps every path back to exactly one chunk (or to none).
"""

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

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
    spec_fanout_key,
)
from zarrfuse.errors import ChunkKeyError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    decode_chunk_key,
    encode_chunk_key,
    keys_per_directory,
)

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
