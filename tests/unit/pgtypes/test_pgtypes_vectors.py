"""int2vector and oidvector: space-separated in text, array_send's format in binary; and the
catalog telling true arrays (array_in) from other types with an element type."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from connector.errors import DecodeError
from connector.pgtypes import TypeCatalog, oids

CATALOG = TypeCatalog()
OIDVECTOR_ARRAY = oids.VECTOR_ARRAY_OF[oids.OIDVECTOR]


@pytest.mark.parametrize(("oid", "text", "expected"), [
    (oids.OIDVECTOR, "1 2 3 4 5 6 7 8", [1, 2, 3, 4, 5, 6, 7, 8]),
    (oids.OIDVECTOR, "4294967295", [2**32 - 1]),
    (oids.OIDVECTOR, "", []),
    (oids.INT2VECTOR, "1 -2 32767", [1, -2, 32767]),
    (oids.INT2VECTOR, "", []),
])
def test_vectors_text(oid: int, text: str, expected: list[int]) -> None:
    assert CATALOG.text_loader(oid)(text) == expected


def _vector_send(code: str, element: int, values: list[int]) -> bytes:
    body = b"".join(struct.pack(f">i{code}", struct.calcsize(f">{code}"), v) for v in values)
    if not values:
        return struct.pack(">iiI", 0, 0, element)
    return struct.pack(">iiIii", 1, 0, element, len(values), 0) + body


@pytest.mark.parametrize(("oid", "code", "values"), [
    (oids.OIDVECTOR, "I", [1, 2, 2**32 - 1]),
    (oids.OIDVECTOR, "I", []),
    (oids.INT2VECTOR, "h", [-32768, 0, 32767]),
])
def test_vectors_binary(oid: int, code: str, values: list[int]) -> None:
    """int2vectorsend / oidvectorsend are array_send (lower bound 0)."""
    element = oids.VECTOR_OF[oid]
    assert CATALOG.binary_loader(oid)(_vector_send(code, element, values)) == values


def test_an_array_of_vectors_is_not_rectangular() -> None:
    """oidvector[]: each element a vector of its own length (not a sub-array)."""
    assert CATALOG.text_loader(OIDVECTOR_ARRAY)('{"1 2",3,""}') == [[1, 2], [3], []]
    items = [_vector_send("I", oids.OID, [1, 2]), _vector_send("I", oids.OID, [3])]
    data = struct.pack(">iiIii", 1, 0, oids.OIDVECTOR, 2, 1) + b"".join(
        struct.pack(">i", len(item)) + item for item in items)
    assert CATALOG.binary_loader(OIDVECTOR_ARRAY)(data) == [[1, 2], [3]]


@pytest.mark.parametrize("text", ["1 x", "1,2", "{1,2}"])
def test_a_malformed_vector_raises_decode_error(text: str) -> None:
    with pytest.raises(DecodeError, match="oidvector"):
        CATALOG.text_loader(oids.OIDVECTOR)(text)


def test_vectors_are_built_in_and_never_looked_up() -> None:
    catalog = TypeCatalog()
    assert catalog.needs_lookup([oids.OIDVECTOR, oids.INT2VECTOR, OIDVECTOR_ARRAY]) == []
    # a catalog row for a built-in changes nothing
    catalog.add_rows([(oids.OIDVECTOR, "pg_catalog", "oidvector", "b", 0, -1, oids.OID, 1013,
                       -1, ",", "A", False)])
    assert catalog.text_loader(oids.OIDVECTOR)("1 2") == [1, 2]


def _row(oid: int, typelem: int, array_in: Any) -> tuple[Any, ...]:
    base = (oid, "public", f"t{oid}", "b", 0, -1, typelem, 0, -1, ",", "U")
    return base if array_in is None else (*base, array_in)


def test_an_element_type_alone_does_not_make_an_array() -> None:
    """A user type with an element type but its own input function (like the vectors): its
    values are not array_in's text, so they stay Unknown (a string of their exact text)."""
    catalog = TypeCatalog()
    catalog.add_rows([_row(16500, oids.INT4, False), _row(16501, oids.INT4, True)])
    assert catalog.resolve(16500).kind == "unknown"
    assert catalog.text_loader(16500)("1 2").raw == "1 2"
    assert catalog.text_loader(16501)("{1,2}") == [1, 2]
    old_form = TypeCatalog()  # rows of 11 columns: the shape decides, as before
    old_form.add_rows([_row(16502, oids.INT4, None)])
    assert old_form.resolve(16502).kind == "array"
