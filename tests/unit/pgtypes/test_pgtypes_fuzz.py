"""Any input either loads or raises DecodeError: no ValueError, struct.error, IndexError,
OverflowError... ever leaks out of a loader."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes import TypeCatalog, oids

CATALOG = TypeCatalog()
ALL_OIDS = sorted([*oids.NAMES, *oids.ELEMENT_OF, 99999])

# text that looks like PostgreSQL output often enough to reach the deep code paths
_ALPHABET = "0123456789-+:. ,{}\"\\/()$€[]=@PYMDTHSWabcdefx BCinfityagoNULyearsmonhs'\t\n\xa0é"
texts = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=40),
    st.text(max_size=20),
    st.sampled_from(
        ["infinity", "-infinity", "24:00:00", "0044-03-15 BC", "{{1,2},{3}}", "\\x0", "P",
         "99999999999-01-01", "2024-02-30", "1 year", "@ 1 ago", "+1-2 +3 +4:05", "NaN"]
    ),
)  # fmt: skip


def _check(load: object, data: object) -> None:
    try:
        load(data)  # type: ignore[operator]
    except DecodeError:
        pass


@pytest.mark.parametrize("oid", ALL_OIDS)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(data=texts)
def test_text_loaders_raise_only_decode_error(oid: int, data: str) -> None:
    _check(CATALOG.text_loader(oid), data)


@pytest.mark.parametrize("oid", ALL_OIDS)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=48))
def test_binary_loaders_raise_only_decode_error(oid: int, data: bytes) -> None:
    _check(CATALOG.binary_loader(oid), data)


@st.composite
def array_bytes(draw: st.DrawFn) -> bytes:
    """Plausible array headers with arbitrary tails."""
    import struct

    ndim = draw(st.integers(-1, 7))
    head = struct.pack(">iiI", ndim, draw(st.integers(0, 1)), 23)
    dims = b"".join(
        struct.pack(">ii", draw(st.integers(-1, 4)), draw(st.integers(-5, 5)))
        for _ in range(max(ndim, 0))
    )
    return head + dims + draw(st.binary(max_size=40))


@pytest.mark.parametrize("oid", [1007, 1009, 1231, 1185])
@given(data=array_bytes())
def test_binary_arrays_raise_only_decode_error(oid: int, data: bytes) -> None:
    _check(CATALOG.binary_loader(oid), data)


@pytest.mark.parametrize("oid", [oids.NUMERIC, oids.TIMESTAMP, oids.TIMESTAMPTZ, oids.DATE])
@given(data=st.binary(min_size=4, max_size=16))
def test_structured_binary_raise_only_decode_error(oid: int, data: bytes) -> None:
    _check(CATALOG.binary_loader(oid), data)
