"""Numbers: bool-free integers (int2/int4/int8, oid), float4/float8, numeric, money."""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value
from ._struct import (
    FLOAT4,
    error,
    unpack_float4,
    unpack_float8,
    unpack_int2,
    unpack_int4,
    unpack_int8,
    unpack_uint4,
)

# ---------------------------------------------------------------------------- integers


def int_text_loader(type_name: str) -> TextLoader:
    def load(data: str) -> int:
        try:
            return int(data)
        except ValueError:
            raise bad_value(type_name, data, "not an integer") from None

    return load


load_int2_text = int_text_loader("int2")
load_int4_text = int_text_loader("int4")
load_int8_text = int_text_loader("int8")
load_oid_text = int_text_loader("oid")


def load_int2_binary(data: bytes) -> int:
    try:
        value: int = unpack_int2(data)[0]
    except error:
        raise bad_value("int2", data, f"expected 2 bytes, got {len(data)}") from None
    return value


def load_int4_binary(data: bytes) -> int:
    try:
        value: int = unpack_int4(data)[0]
    except error:
        raise bad_value("int4", data, f"expected 4 bytes, got {len(data)}") from None
    return value


def load_int8_binary(data: bytes) -> int:
    try:
        value: int = unpack_int8(data)[0]
    except error:
        raise bad_value("int8", data, f"expected 8 bytes, got {len(data)}") from None
    return value


def load_oid_binary(data: bytes) -> int:
    try:
        value: int = unpack_uint4(data)[0]
    except error:
        raise bad_value("oid", data, f"expected 4 bytes, got {len(data)}") from None
    return value


# ---------------------------------------------------------------------------- floats


def load_float4_text(data: str) -> float:
    """PostgreSQL (12+) prints the shortest decimal that reads back as the same float4."""
    try:
        return float(data)
    except ValueError:
        raise bad_value("float4", data, "not a number") from None


load_float8_text = load_float4_text


def _shortest_float4(value: float) -> float:
    """The float with the fewest digits that still rounds to the same float4 as ``value``.

    So a float4 column gives the same Python value in the binary format as in the text
    format (``1.1``, not ``1.100000023841858``); either is the exact float4 once re-encoded
    to a 32-bit float (Avro ``float``).
    """
    if value != value or value in (_INF, -_INF):
        return value
    pack, unpack = FLOAT4.pack, FLOAT4.unpack
    # PostgreSQL's shortest form (its Ryu) never picks a decimal exactly halfway to a
    # neighbouring float4, even one that rounds back to the value (ties go to even): neither
    # may we, or the two formats give different doubles for the same float4.
    bits = _FLOAT4_BITS.unpack(pack(value))[0]
    halfway = {(value + unpack(_FLOAT4_BITS.pack(b))[0]) / 2
               for b in (bits - 1, bits + 1) if 0 <= b < 2**32}
    # Normal float4s have 24 significant bits, so a decimal of 6 digits or fewer that rounds
    # to the value is the value rounded to 6 digits; subnormals have fewer bits: try them all.
    for fmt in _PRECISIONS if abs(value) >= _FLOAT4_MIN_NORMAL else _SUBNORMAL_PRECISIONS:
        candidate = float(fmt % value)
        if unpack(pack(candidate))[0] == value and candidate not in halfway:
            return candidate
    return float(f"{value:.9g}")


_INF = float("inf")
_FLOAT4_BITS = struct.Struct(">I")
_FLOAT4_MIN_NORMAL = 2.0**-126
_PRECISIONS = ("%.6g", "%.7g", "%.8g")
_SUBNORMAL_PRECISIONS = tuple(f"%.{digits}g" for digits in range(1, 9))


def load_float4_binary(data: bytes) -> float:
    try:
        value: float = unpack_float4(data)[0]
    except error:
        raise bad_value("float4", data, f"expected 4 bytes, got {len(data)}") from None
    return _shortest_float4(value)


def load_float8_binary(data: bytes) -> float:
    try:
        value: float = unpack_float8(data)[0]
    except error:
        raise bad_value("float8", data, f"expected 8 bytes, got {len(data)}") from None
    return value


# ---------------------------------------------------------------------------- numeric

NUMERIC_POS = 0x0000
NUMERIC_NEG = 0x4000
NUMERIC_NAN = 0xC000
NUMERIC_PINF = 0xD000
NUMERIC_NINF = 0xF000
_NUMERIC_HEAD = struct.Struct(">hhHH")  # ndigits, weight, sign, dscale
_unpack_numeric_head = _NUMERIC_HEAD.unpack_from
_SPECIAL = {
    NUMERIC_NAN: Decimal("NaN"),
    NUMERIC_PINF: Decimal("Infinity"),
    NUMERIC_NINF: Decimal("-Infinity"),
}


# per digit count (numeric(12,2) has 1 to 4 digits): the digits' unpacker and format
_DIGITS = [(struct.Struct(f">{n}H").unpack_from, "%04d" * n) for n in range(64)]


_POW10 = [10**n for n in range(32)]


def _digits(ndigits: int) -> tuple[Callable[..., tuple[int, ...]], str]:
    if ndigits < 64:
        return _DIGITS[ndigits]
    return struct.Struct(f">{ndigits}H").unpack_from, "%04d" * ndigits


def load_numeric_text(data: str) -> Decimal:
    """Exact: ``Decimal`` keeps every digit and the scale (``1.50`` stays ``1.50``)."""
    try:
        return Decimal(data)
    except InvalidOperation:
        raise bad_value("numeric", data, "not a number") from None


def load_numeric_binary(data: bytes) -> Decimal:
    """numeric_send: int16 ndigits, int16 weight, uint16 sign, uint16 dscale, base-10000 digits.

    The value is ``sum(digit[i] * 10000**(weight - i))``; ``dscale`` is the number of
    decimal digits after the point, which the result keeps (as the text format does).
    """
    try:
        ndigits, weight, sign, dscale = _unpack_numeric_head(data)
    except error:
        raise bad_value("numeric", data, "shorter than its 8-byte header") from None
    if sign != NUMERIC_POS and sign != NUMERIC_NEG:
        special = _SPECIAL.get(sign)
        if special is None:
            raise bad_value("numeric", data, f"unknown sign 0x{sign:04x}")
        return special
    if ndigits < 0 or len(data) != 8 + 2 * ndigits:
        raise bad_value("numeric", data, f"{ndigits} digits do not fit {len(data)} bytes")
    if dscale > 0x3FFF:
        raise bad_value("numeric", data, f"impossible display scale {dscale}")
    if ndigits == 0:
        return Decimal(f"0E-{dscale}")
    unpack_digits, digits_format = _digits(ndigits)
    groups = unpack_digits(data, 8)
    exponent = 4 * (weight - ndigits + 1)
    if ndigits <= 4 and -32 < exponent + dscale < 32:
        # up to 16 digits (numeric(12,2), most amounts): integer arithmetic, no string of digits
        coefficient = 0
        for group in groups:
            if group > 9999:
                raise bad_value("numeric", data, "a base-10000 digit is above 9999")
            coefficient = coefficient * 10000 + group
        if exponent < -dscale:
            cut = _POW10[-dscale - exponent]
            if not coefficient % cut:
                coefficient //= cut
                exponent = -dscale
        elif exponent > -dscale:
            coefficient *= _POW10[exponent + dscale]
            exponent = -dscale
        return Decimal(f"{'-' if sign else ''}{coefficient}E{exponent}")
    if max(groups) > 9999:
        raise bad_value("numeric", data, "a base-10000 digit is above 9999")
    digits = digits_format % groups
    if exponent < -dscale:
        cut = -dscale - exponent
        # Digits past the display scale are zero in anything PostgreSQL sends; keep any
        # that are not rather than lose them.
        if not digits[-cut:].strip("0"):
            digits = digits[:-cut]
            exponent = -dscale
    elif exponent > -dscale:
        digits += "0" * (exponent + dscale)
        exponent = -dscale
    return Decimal(f"{'-' if sign else ''}{digits}E{exponent}")


def numeric_precision_scale(typmod: int) -> tuple[int, int] | None:
    """``numeric(p, s)``'s (p, s) from the column's type modifier; None when unconstrained.

    The scale is 11-bit signed since PostgreSQL 15 (``numeric(3, -2)``, ``numeric(2, 5)``).
    """
    if typmod < 4:
        return None
    value = typmod - 4
    precision = (value >> 16) & 0xFFFF
    scale = ((value & 0x7FF) ^ 0x400) - 0x400
    return precision, scale


# ---------------------------------------------------------------------------- money

MONEY_FRAC_DIGITS = 2


def money_text_loader(frac_digits: int = MONEY_FRAC_DIGITS) -> TextLoader:
    """money's text form depends on ``lc_monetary`` (``$1,234.56``, ``-1.234,56 €``,
    ``($1.00)``...): the digits are read whatever the symbols and separators, the last
    ``frac_digits`` of them are the fraction, and ``-`` or ``(`` make it negative.
    ``frac_digits`` is the locale's (2 for C/POSIX and most locales).
    """
    scale = -frac_digits

    def load(data: str) -> Decimal:
        digits = "".join(ch for ch in data if ch.isdigit())
        if not digits:
            raise bad_value("money", data, "no digits")
        if frac_digits:
            # the character before the fraction digits must be the decimal separator
            core = data.rstrip().rstrip(")")
            end = len(core)
            while end and not core[end - 1].isdigit():
                end -= 1
            start = end - frac_digits
            if (
                start < 2
                or not core[start:end].isdigit()
                or core[start - 1].isdigit()
                or not any(ch.isdigit() for ch in core[: start - 1])
            ):
                raise bad_value("money", data, f"expected {frac_digits} fraction digits")
        negative = "-" in data or "(" in data
        try:
            return Decimal(f"{'-' if negative else ''}{digits}E{scale}")
        except InvalidOperation:  # digits of other scripts Decimal does not take
            raise bad_value("money", data, "not a number") from None

    return load


def money_binary_loader(frac_digits: int = MONEY_FRAC_DIGITS) -> BinaryLoader:
    """cash_send: an int8 count of the currency's smallest unit (cents)."""
    scale = -frac_digits

    def load(data: bytes) -> Decimal:
        try:
            cents: int = unpack_int8(data)[0]
        except error:
            raise bad_value("money", data, f"expected 8 bytes, got {len(data)}") from None
        return Decimal(f"{cents}E{scale}")

    return load


TEXT_LOADERS: dict[int, TextLoader] = {
    oids.INT2: load_int2_text,
    oids.INT4: load_int4_text,
    oids.INT8: load_int8_text,
    oids.OID: load_oid_text,
    oids.FLOAT4: load_float4_text,
    oids.FLOAT8: load_float8_text,
    oids.NUMERIC: load_numeric_text,
    oids.MONEY: money_text_loader(),
}

BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.INT2: load_int2_binary,
    oids.INT4: load_int4_binary,
    oids.INT8: load_int8_binary,
    oids.OID: load_oid_binary,
    oids.FLOAT4: load_float4_binary,
    oids.FLOAT8: load_float8_binary,
    oids.NUMERIC: load_numeric_binary,
    oids.MONEY: money_binary_loader(),
}
