"""The C row encoder's plan for one table version (`connector._native.RowPlan`).

Per column the plan has a kind -- which C parser turns PostgreSQL's canonical text straight
into Avro bytes -- and a Python fallback giving the same column's union field the Python way
(load, convert, encode). The C side uses the fallback for anything but canonical text, so the
bytes are always those of `TableCodec`'s Python path (tests/unit/avro/test_native_rows.py).

    plan = row_plan(columns, key_columns, text_loaders, binary_loaders, encoders)
    row_fields, key_fields = plan.encode(tuple_data, toast_list, True)

None (no plan) when the extension is not built or disabled, or a column's Avro type has no
hand encoder (fastavro then writes every row, as before).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from connector.pgoutput.messages import UNCHANGED_TOAST
from connector.pgtypes import oids
from connector.speedups import native

from .schema import ColumnSpec

__all__ = ["row_plan"]

# The kinds of connector/native/rowenc.c
_FALLBACK, _STRING, _BOOL, _INT, _DOUBLE, _FLOAT, _DECIMAL = 0, 1, 2, 3, 4, 5, 6
_DATE, _TIME, _TIMESTAMP, _TIMESTAMPTZ, _UUID = 7, 8, 9, 10, 11
_INT2, _INT4, _OID, _JSONB = 12, 13, 14, 15

_KINDS: Final = {
    oids.TEXT: _STRING, oids.VARCHAR: _STRING, oids.BPCHAR: _STRING, oids.NAME: _STRING,
    oids.JSON: _STRING, oids.JSONB: _JSONB,
    oids.BOOL: _BOOL,
    oids.INT2: _INT2, oids.INT4: _INT4, oids.INT8: _INT, oids.OID: _OID,
    oids.FLOAT8: _DOUBLE, oids.FLOAT4: _FLOAT,
    oids.NUMERIC: _DECIMAL,
    oids.DATE: _DATE, oids.TIME: _TIME, oids.TIMESTAMP: _TIMESTAMP,
    oids.TIMESTAMPTZ: _TIMESTAMPTZ,
    oids.UUID: _UUID,
}  # fmt: skip
_MAX_NATIVE_SCALE: Final = 18  # the C decimal works in int64

Encoder = Callable[[Any], bytes]
Loader = Callable[[Any], Any]


def _kind(column: ColumnSpec) -> tuple[int, int, int]:
    """(kind, decimal scale, decimal integer digits) of a column; the fallback kind for
    anything not listed."""
    kind = _KINDS.get(column.type_oid, _FALLBACK)
    if kind == _DECIMAL:
        avro = column.avro_type
        if not (isinstance(avro, dict) and avro.get("logicalType") == "decimal"):
            return _FALLBACK, 0, 0  # unbounded numeric: a string in the contract
        scale, precision = int(avro.get("scale", 0)), int(avro["precision"])
        if 0 <= scale <= _MAX_NATIVE_SCALE:
            return _DECIMAL, scale, precision - scale
        return _FALLBACK, 0, 0
    return kind, 0, 0


def _piece(text: Loader, binary: Loader, encode: Encoder) -> Callable[[Any], bytes]:
    """The Python way to one column's union field: b"\\x00" or b"\\x02" + datum."""

    def piece(raw: Any) -> bytes:
        datum = text(raw) if isinstance(raw, str) else binary(raw)
        return b"\x00" if datum is None else b"\x02" + encode(datum)

    return piece


def row_plan(columns: Sequence[ColumnSpec], key_columns: Sequence[ColumnSpec],
             text: Sequence[Loader], binary: Sequence[Loader],
             encoders: Sequence[Encoder | None]) -> Any:
    """The RowPlan of a table version, or None (see the module docstring).

    `text`/`binary`: per column, pgtypes loader composed with the column's converter;
    `encoders`: per column, the hand encoder of its Avro type (None: fastavro's)."""
    if native is None or not columns or any(encode is None for encode in encoders):
        return None
    kinds = [_kind(column) for column in columns]
    return native.RowPlan(
        bytes(kind for kind, _, _ in kinds),
        tuple(scale for _, scale, _ in kinds),
        tuple(digits for _, _, digits in kinds),
        tuple(_piece(load_text, load_binary, encode)  # type: ignore[arg-type]
              for load_text, load_binary, encode in zip(text, binary, encoders, strict=True)),
        tuple(column.avro_name for column in columns),
        tuple(column.index for column in key_columns),
        UNCHANGED_TOAST,
    )
