"""Integers, floats, numeric and money, in both formats."""

from __future__ import annotations

import math
import struct
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes import numeric_precision_scale
from connector.pgtypes.numeric import (
    load_float4_binary,
    load_float4_text,
    load_float8_binary,
    load_float8_text,
    load_int2_binary,
    load_int2_text,
    load_int4_binary,
    load_int4_text,
    load_int8_binary,
    load_int8_text,
    load_numeric_binary,
    load_numeric_text,
    load_oid_binary,
    load_oid_text,
    money_binary_loader,
    money_text_loader,
)
from tests.support.pgtypes_encoders import numeric_send


@pytest.mark.parametrize(
    ("text_loader", "binary_loader", "fmt", "values"),
    [
        (load_int2_text, load_int2_binary, ">h", [0, -32768, 32767]),
        (load_int4_text, load_int4_binary, ">i", [0, -(2**31), 2**31 - 1]),
        (load_int8_text, load_int8_binary, ">q", [0, -(2**63), 2**63 - 1]),
        (load_oid_text, load_oid_binary, ">I", [0, 2**32 - 1]),
    ],
)
def test_integers(text_loader, binary_loader, fmt, values) -> None:  # type: ignore[no-untyped-def]
    for value in values:
        assert text_loader(str(value)) == value
        assert binary_loader(struct.pack(fmt, value)) == value
    with pytest.raises(DecodeError, match="not an integer"):
        text_loader("12x")
    with pytest.raises(DecodeError, match="expected"):
        binary_loader(b"\x00" * (struct.calcsize(fmt) + 1))
    with pytest.raises(DecodeError):
        binary_loader(b"")


def test_floats_special_values() -> None:
    for loader in (load_float4_text, load_float8_text):
        assert math.isnan(loader("NaN"))
        assert loader("Infinity") == math.inf
        assert loader("-Infinity") == -math.inf
        assert loader("-0") == 0.0 and math.copysign(1, loader("-0")) == -1
        with pytest.raises(DecodeError):
            loader("one")
    assert math.isnan(load_float4_binary(struct.pack(">f", math.nan)))
    assert load_float4_binary(struct.pack(">f", -math.inf)) == -math.inf
    assert load_float8_binary(struct.pack(">d", math.inf)) == math.inf
    assert load_float8_binary(struct.pack(">d", 5e-324)) == 5e-324
    with pytest.raises(DecodeError):
        load_float4_binary(b"\x00\x00\x00")
    with pytest.raises(DecodeError):
        load_float8_binary(b"\x00\x00\x00\x00")


def test_float4_binary_is_the_shortest_decimal_like_the_text_format() -> None:
    assert load_float4_binary(struct.pack(">f", 1.1)) == 1.1
    assert load_float4_binary(struct.pack(">f", 0.1)) == 0.1
    assert load_float4_binary(struct.pack(">f", 3.4028235e38)) == 3.4028235e38
    assert load_float4_binary(struct.pack(">I", 1)) == 1e-45  # smallest subnormal
    assert load_float4_binary(struct.pack(">f", 16777216.0)) == 16777216.0


@given(st.integers(0, 2**32 - 1))
def test_float4_binary_reads_back_as_the_same_float4(bits: int) -> None:
    data = struct.pack(">I", bits)
    value = load_float4_binary(data)
    original = struct.unpack(">f", data)[0]
    if math.isnan(original):
        assert math.isnan(value)
    else:
        assert struct.pack(">f", value) == data
        # and as short as a float4's own shortest representation: at most 9 significant
        # digits (not a string length: 384383500000000.0 is 3.843835e+14 written out)
        assert _significant_digits(repr(value)) <= 9


def _significant_digits(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


def test_float4_shortest_form_is_counted_in_digits_not_characters() -> None:
    """Hypothesis found bits=1471073313 (3.843835e+14) against a length-based check."""
    value = load_float4_binary(struct.pack(">I", 1471073313))
    assert struct.pack(">f", value) == struct.pack(">I", 1471073313)
    assert _significant_digits(repr(value)) == 7
    assert _significant_digits("1e-45") == 1 and _significant_digits("-0.000123") == 3


# ---------------------------------------------------------------------------- numeric


def _numeric(ndigits: int, weight: int, sign: int, dscale: int, *digits: int) -> bytes:
    return struct.pack(f">hhHH{len(digits)}H", ndigits, weight, sign, dscale, *digits)


def test_numeric_binary_hand_made() -> None:
    assert repr(load_numeric_binary(_numeric(0, 0, 0, 0))) == "Decimal('0')"
    assert repr(load_numeric_binary(_numeric(0, 0, 0, 2))) == "Decimal('0.00')"
    assert load_numeric_binary(_numeric(2, 0, 0, 2, 1, 5000)) == Decimal("1.50")
    assert str(load_numeric_binary(_numeric(2, 0, 0, 2, 1, 5000))) == "1.50"
    assert str(load_numeric_binary(_numeric(1, 0, 0, 2, 100))) == "100.00"
    assert str(load_numeric_binary(_numeric(1, 5, 0x4000, 0, 1))) == "-100000000000000000000"
    # negative weight: 0.0001 and 0.00000012
    assert str(load_numeric_binary(_numeric(1, -1, 0, 4, 1))) == "0.0001"
    assert str(load_numeric_binary(_numeric(1, -2, 0, 8, 12))) == "1.2E-7"
    assert load_numeric_binary(_numeric(1, -2, 0, 8, 12)) == Decimal("0.00000012")
    assert load_numeric_binary(_numeric(0, 0, 0xC000, 0)).is_nan()
    assert load_numeric_binary(_numeric(0, 0, 0xD000, 0)) == Decimal("Infinity")
    assert load_numeric_binary(_numeric(0, 0, 0xF000, 0)) == Decimal("-Infinity")


def test_numeric_huge_and_tiny() -> None:
    thousand_nines = Decimal("9" * 1000)
    assert load_numeric_binary(numeric_send(thousand_nines)) == thousand_nines
    tiny = Decimal("1E-16383")
    assert load_numeric_binary(numeric_send(tiny)) == tiny
    assert load_numeric_text("0." + "0" * 16382 + "1") == tiny
    huge = Decimal("1" + "0" * 131071)
    assert load_numeric_binary(numeric_send(huge)) == huge


def test_numeric_keeps_extra_digits_beyond_dscale_rather_than_losing_them() -> None:
    # 1.2345 with dscale 2 is not something PostgreSQL sends, but nothing is dropped
    assert load_numeric_binary(_numeric(2, 0, 0, 2, 1, 2345)) == Decimal("1.2345")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00\x01", "header"),
        (_numeric(2, 0, 0, 0, 1), "do not fit"),
        (_numeric(1, 0, 0, 0, 1, 2), "do not fit"),
        (_numeric(1, 0, 0x8000, 0, 1), "unknown sign"),
        (_numeric(1, 0, 0, 0, 10000), "above 9999"),
        (_numeric(-1, 0, 0, 0), "do not fit"),
        (_numeric(0, 0, 0, 0x4000), "display scale"),
    ],
)
def test_numeric_binary_malformed(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        load_numeric_binary(data)


def test_numeric_text() -> None:
    assert repr(load_numeric_text("1.50")) == "Decimal('1.50')"
    assert load_numeric_text("NaN").is_nan()
    assert load_numeric_text("Infinity") == Decimal("Infinity")
    assert load_numeric_text("-Infinity") == Decimal("-Infinity")
    with pytest.raises(DecodeError, match="numeric"):
        load_numeric_text("1.2.3")


decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: -16383 <= d.as_tuple().exponent <= 1000  # type: ignore[operator]
)


@given(decimals)
def test_numeric_binary_round_trip(value: Decimal) -> None:
    loaded = load_numeric_binary(numeric_send(value))
    assert loaded == value
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    assert loaded.as_tuple().exponent == min(exponent, 0)  # the scale is kept
    if exponent <= 0:
        assert loaded.is_signed() == (value.is_signed() and value != 0)


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6))
def test_numeric_text_and_binary_agree(value: Decimal) -> None:
    text = format(value, "f")
    assert repr(load_numeric_text(text).normalize()) == repr(
        load_numeric_binary(numeric_send(value)).normalize()
    )


def test_numeric_precision_scale() -> None:
    def typmod(p: int, s: int) -> int:
        return ((p << 16) | (s & 0x7FF)) + 4

    assert numeric_precision_scale(-1) is None
    assert numeric_precision_scale(typmod(10, 2)) == (10, 2)
    assert numeric_precision_scale(typmod(1000, 0)) == (1000, 0)
    assert numeric_precision_scale(typmod(3, -2)) == (3, -2)
    assert numeric_precision_scale(typmod(2, 5)) == (2, 5)


# ---------------------------------------------------------------------------- money


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.56", "1234.56"),
        ("-$1,234.56", "-1234.56"),
        ("$0.05", "0.05"),
        ("($1,234.56)", "-1234.56"),
        ("1.234,56 €", "1234.56"),
        ("-1.234,56 €", "-1234.56"),
        ("€ -1.234,56", "-1234.56"),
        ("CHF 1'234.56", "1234.56"),
        ("1 234,56 zł", "1234.56"),
        ("Rs.1,23,456.78", "123456.78"),
        ("-$92,233,720,368,547,758.08", "-92233720368547758.08"),
    ],
)
def test_money_text_in_any_locale(text: str, expected: str) -> None:
    value = money_text_loader()(text)
    assert value == Decimal(expected)
    assert value.as_tuple().exponent == -2


def test_money_text_without_fraction_digits() -> None:
    assert money_text_loader(0)("¥1,234") == Decimal("1234")
    assert money_text_loader(3)("1.234,567 KD") == Decimal("1234.567")


@pytest.mark.parametrize("text", ["", "$", "$12", "$1.2", "$1,234"])
def test_money_text_malformed(text: str) -> None:
    with pytest.raises(DecodeError, match="money"):
        money_text_loader()(text)


def test_money_binary() -> None:
    load = money_binary_loader()
    assert repr(load(struct.pack(">q", -123456))) == "Decimal('-1234.56')"
    assert load(struct.pack(">q", 2**63 - 1)) == Decimal("92233720368547758.07")
    assert money_binary_loader(0)(struct.pack(">q", 5)) == Decimal(5)
    with pytest.raises(DecodeError, match="money"):
        load(b"\x00")
