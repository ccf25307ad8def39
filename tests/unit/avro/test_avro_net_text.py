"""PostgreSQL's text of IPv6 inet/cidr values, as their Avro strings (outputs taken from
PostgreSQL 15 and 18)."""

from __future__ import annotations

import pytest

from connector.avro.typemap import column_codec
from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.net import load_cidr_text, load_inet_binary, load_inet_text

# PostgreSQL's output for each input (SELECT '<input>'::inet / ::cidr)
INET = {
    "::2": "::2", "::1": "::1", "::1.2.3.4": "::1.2.3.4", "::ffff:1.2.3.4": "::ffff:1.2.3.4",
    "::ffff:0:0": "::ffff:0.0.0.0", "::0.1.0.0": "::0.1.0.0", "::1:0:0:0": "::1:0:0:0",
    "::ffff:1.2.3.4/120": "::ffff:1.2.3.4/120", "2001:db8::1/64": "2001:db8::1/64",
    "1.2.3.4/24": "1.2.3.4/24", "1.2.3.4": "1.2.3.4",
}
CIDR = {"::ffff:1.2.3.0/120": "::ffff:1.2.3.0/120", "2001:db8::/32": "2001:db8::/32",
        "10.0.0.0/8": "10.0.0.0/8"}


@pytest.mark.parametrize(("text", "expected"), INET.items())
def test_inet_avro_string_is_postgres_text(text: str, expected: str) -> None:
    convert = column_codec(TypeCatalog(), oids.INET).convert
    assert convert is not None
    assert convert(load_inet_text(expected)) == expected
    value = load_inet_text(text)
    assert convert(value) == expected
    family = 3 if ":" in text else 2
    packed = value.packed if hasattr(value, "packed") else value.ip.packed  # type: ignore[union-attr]
    bits = value.network.prefixlen if hasattr(value, "network") else len(packed) * 8  # type: ignore[union-attr]
    binary = bytes([family, bits, 0, len(packed)]) + packed
    assert convert(load_inet_binary(binary)) == expected


@pytest.mark.parametrize(("text", "expected"), CIDR.items())
def test_cidr_avro_string_is_postgres_text(text: str, expected: str) -> None:
    convert = column_codec(TypeCatalog(), oids.CIDR).convert
    assert convert is not None
    assert convert(load_cidr_text(text)) == expected
