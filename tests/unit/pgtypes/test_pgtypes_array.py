"""Arrays: any dimension, NULL elements, quoting and escaping, both formats."""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.array import array_text_loader
from connector.pgtypes.text import load_text_text
from tests.support.pgtypes_encoders import array_out, array_send, numeric_send

CATALOG = TypeCatalog()
int4_array_text = CATALOG.text_loader(1007)
int4_array_binary = CATALOG.binary_loader(1007)
text_array_text = CATALOG.text_loader(1009)
text_array_binary = CATALOG.binary_loader(1009)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", []),
        ("{1}", [1]),
        ("{1,2,NULL}", [1, 2, None]),
        ("{NULL}", [None]),
        ("{{1,2},{3,NULL}}", [[1, 2], [3, None]]),
        ("{{{1},{2}},{{3},{4}}}", [[[1], [2]], [[3], [4]]]),
        ("[0:1]={5,6}", [5, 6]),
        ("[1:2][-1:0]={{1,2},{3,4}}", [[1, 2], [3, 4]]),
        (" { 1 , 2 } ", [1, 2]),
    ],
)
def test_int_arrays_text(text: str, expected: list[Any]) -> None:
    assert int4_array_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a,b",NULL,"x\\"y"}', ["a,b", None, 'x"y']),
        ('{"NULL",null,Null,""}', ["NULL", None, None, ""]),
        ('{"back\\\\slash","{}"," sp "}', ["back\\slash", "{}", " sp "]),
        ('{{a,b},{NULL,"c d"}}', [["a", "b"], [None, "c d"]]),
        ("{a b,c}", ["a b", "c"]),
        ('{"ünï","tab\there"}', ["ünï", "tab\there"]),
        ("{a\\,b}", ["a,b"]),
        ('{"multi\nline"}', ["multi\nline"]),
    ],
)
def test_text_arrays_text(text: str, expected: list[Any]) -> None:
    assert text_array_text(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "{", "}", "{1,2", "{1,,2}", "{,1}", "{1,}", "{1}}", "{{1},2}", "{1}{2}", '{"a}',
     "[0:1]{1}", "{1} x", "{{1}", "{1 2", "{a\"b}"],
)  # fmt: skip
def test_malformed_text_arrays(text: str) -> None:
    with pytest.raises(DecodeError):
        text_array_text(text)


def test_element_errors_propagate_as_decode_errors() -> None:
    with pytest.raises(DecodeError, match="int4"):
        int4_array_text("{1,x}")
    with pytest.raises(DecodeError, match="int4"):
        int4_array_text('{{1,"x"}}')


def test_box_delimiter() -> None:
    load = array_text_loader(load_text_text, "box[]", ";")
    assert load("{(1,1),(0,0);(2,2),(1,1)}") == ["(1,1),(0,0)", "(2,2),(1,1)"]


def _int4(value: int) -> bytes:
    return struct.pack(">i", value)


def test_binary_arrays() -> None:
    assert int4_array_binary(array_send([], 23, _int4)) == []
    assert int4_array_binary(array_send([1, None, 3], 23, _int4)) == [1, None, 3]
    nested = [[[1, 2, 3], [4, None, 6]], [[7, 8, 9], [None, None, 12]]]
    assert int4_array_binary(array_send(nested, 23, _int4)) == nested
    numeric_array = CATALOG.binary_loader(oids.ARRAY_OF[oids.NUMERIC])
    values = [Decimal("1.50"), None, Decimal("NaN")]
    assert repr(numeric_array(array_send(values, 1700, numeric_send))) == repr(values)
    # lower bounds other than 1 are accepted (and dropped)
    data = struct.pack(">iiIiii", 1, 0, 23, 1, 0, 4) + _int4(9)
    assert int4_array_binary(data) == [9]
    # a dimension of size zero
    assert int4_array_binary(struct.pack(">iiIiiii", 2, 0, 23, 2, 1, 0, 1)) == []


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00\x00\x01",
        struct.pack(">iiI", 7, 0, 23),  # too many dimensions
        struct.pack(">iiI", -1, 0, 23),
        struct.pack(">iiIii", 1, 0, 23, 2, 1) + _int4(4) + _int4(1),  # one element missing
        struct.pack(">iiIii", 1, 0, 23, 1, 1) + _int4(8) + _int4(1),  # element past the end
        struct.pack(">iiIii", 1, 0, 23, 1, 1) + _int4(-2),
        struct.pack(">iiIii", 1, 0, 23, 1, 1) + _int4(4) + _int4(1) + b"x",  # trailing
        struct.pack(">iiIii", 1, 0, 23, -1, 1),
        struct.pack(">iiIii", 1, 0, 23, 2**30, 1),
        struct.pack(">iiI", 0, 0, 23) + b"x",
        struct.pack(">iiIii", 1, 1, 23, 1, 1) + _int4(3) + b"abc",  # element of wrong size
    ],
)
def test_malformed_binary_arrays(data: bytes) -> None:
    with pytest.raises(DecodeError):
        int4_array_binary(data)


elements = st.one_of(st.none(), st.text(st.characters(exclude_categories=("Cs",)), max_size=8))


def _rectangular(draw_list: list[Any]) -> st.SearchStrategy[list[Any]]:
    return st.just(draw_list)


@st.composite
def md_arrays(draw: st.DrawFn) -> list[Any]:
    ndim = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 3)) for _ in range(ndim)]

    def build(level: int) -> list[Any]:
        if level == ndim - 1:
            return [draw(elements) for _ in range(dims[level])]
        return [build(level + 1) for _ in range(dims[level])]

    return build(0)


@given(md_arrays())
def test_text_array_round_trip(value: list[Any]) -> None:
    assert text_array_text(array_out(value)) == value
    assert text_array_binary(array_send(value, 25, str.encode)) == value


@pytest.mark.parametrize(
    ("oid", "fmt", "values"),
    [
        (oids.INT2, ">h", [-(2**15), 0, 2**15 - 1]),
        (oids.INT4, ">i", [1, -2, 3]),
        (oids.INT8, ">q", [-(2**63), 2**63 - 1]),
        (oids.FLOAT8, ">d", [1.5, float("inf")]),
        (oids.OID, ">I", [0, 2**32 - 1]),
        (oids.FLOAT4, ">f", [1.5, -0.25]),
        (oids.BOOL, ">?", [True, False]),
    ],
)
def test_fixed_width_elements_with_and_without_nulls(oid: int, fmt: str, values: list[Any]) -> None:
    load = CATALOG.binary_loader(oids.ARRAY_OF[oid])

    def encode(value: Any) -> bytes:
        return struct.pack(fmt, value)

    assert load(array_send(values, oid, encode)) == values
    with_null = [*values, None]
    assert load(array_send(with_null, oid, encode)) == with_null
    grid = [values, values[::-1]]
    assert load(array_send(grid, oid, encode)) == grid


def test_fixed_width_fast_path_checks_every_length() -> None:
    # two int4 elements of 3 and 5 bytes: the total size is right, the lengths are not
    data = struct.pack(">iiIii", 1, 0, 23, 2, 1) + _int4(3) + b"abc" + _int4(5) + b"defgh"
    with pytest.raises(DecodeError, match="int4"):
        int4_array_binary(data)
