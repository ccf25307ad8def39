"""The C row encoder's plan for one table version (`connector._native.RowPlan`).

Per column the plan has a kind -- which C parser turns PostgreSQL's canonical text straight
into Avro bytes -- and a Python fallback giving the same column's union field the Python way
(load, convert, encode). The C side uses the fallback for anything but canonical text, so the
bytes are always those of `TableCodec`'s Python path (tests/unit/avro/test_avro_native_rows.py).
A value the column's mapping refuses and that falls back to null (connector/avro/fallback.py)
comes back as ``(b"\\x00", exact text)``: the C side lists the text in the Envelope's
``unparsed`` map (under the field name, or ``before.`` + it for the old row).

    plan = row_plan(columns, key_columns, text_loaders, binary_loaders, encoders)
    row_fields, key_fields = plan.encode(tuple_data, toast_list, True)

None (no plan) when the extension is not built or disabled, or a column's Avro type has no
hand encoder (fastavro then writes every row, as before).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final

from connector.pgoutput.messages import UNCHANGED_TOAST
from connector.pgtypes import oids
from connector.speedups import native

from .fallback import exact_text
from .schema import ColumnSpec

__all__ = ["row_plan"]

# Which C parser of connector/native/rowenc.c takes a type, by the name of its kind: the
# numbers come from the extension itself (its ROW_KINDS), never a copy of them.
_KIND_NAMES: Final = {
    oids.TEXT: "STRING", oids.VARCHAR: "STRING", oids.BPCHAR: "STRING", oids.NAME: "STRING",
    oids.JSON: "STRING", oids.JSONB: "JSONB",
    oids.BOOL: "BOOL",
    oids.INT2: "INT2", oids.INT4: "INT4", oids.INT8: "INT", oids.OID: "OID",
    oids.FLOAT8: "DOUBLE", oids.FLOAT4: "FLOAT",
    oids.NUMERIC: "DECIMAL",
    oids.DATE: "DATE", oids.TIME: "TIME", oids.TIMESTAMP: "TIMESTAMP",
    oids.TIMESTAMPTZ: "TIMESTAMPTZ",
    oids.UUID: "UUID",
}  # fmt: skip
_MAX_NATIVE_SCALE: Final = 18  # the C decimal works in int64
#: The logical type each C parser of a date/time/uuid type writes: a column of that type
#: encoded otherwise (Debezium's format: debezium_types) takes the Python path.
_LOGICAL_TYPES: Final = {
    oids.DATE: "date", oids.TIME: "time-micros", oids.TIMESTAMP: "local-timestamp-micros",
    oids.TIMESTAMPTZ: "timestamp-micros", oids.UUID: "uuid",
}  # fmt: skip

Encoder = Callable[[Any], bytes]
Loader = Callable[[Any], Any]


def _kind(column: ColumnSpec, kinds: dict[str, int]) -> tuple[int, int, int]:
    """(kind, decimal scale, decimal integer digits) of a column; the fallback kind for
    anything not listed. `kinds`: the extension's ROW_KINDS."""
    if column.mask is not None:  # its Python piece applies the mask (avro/masking.py)
        return kinds["FALLBACK"], 0, 0
    name = _KIND_NAMES.get(column.type_oid, "FALLBACK")
    logical = _LOGICAL_TYPES.get(column.type_oid)
    if logical is not None and (not isinstance(column.avro_type, dict)
                                or column.avro_type.get("logicalType") != logical):
        return kinds["FALLBACK"], 0, 0  # another encoding (--value-format debezium)
    if name == "DECIMAL":
        avro = column.avro_type
        if not (isinstance(avro, dict) and avro.get("logicalType") == "decimal"):
            return kinds["FALLBACK"], 0, 0  # unbounded numeric: a string in the contract
        scale, precision = int(avro.get("scale", 0)), int(avro["precision"])
        if 0 <= scale <= _MAX_NATIVE_SCALE:
            return kinds["DECIMAL"], scale, precision - scale
        return kinds["FALLBACK"], 0, 0
    return kinds[name], 0, 0


def _piece(text: Loader, binary: Loader, encode: Encoder,
           fallback: Callable[[Any, BaseException], Any] | None = None,
           ) -> Callable[[Any], bytes | tuple[bytes, str]]:
    """The Python way to one column's union field: b"\\x00" or b"\\x02" + datum; for a value
    that falls back to null, (b"\\x00", its exact text) for ``unparsed``.

    `fallback(raw, exc)`: the datum of a value the column's mapping refused
    (connector/avro/fallback.py); None: the error propagates."""

    def piece(raw: Any) -> bytes | tuple[bytes, str]:
        try:
            datum = text(raw) if isinstance(raw, str) else binary(raw)
            return b"\x00" if datum is None else b"\x02" + encode(datum)
        except Exception as exc:
            if fallback is None:
                raise
            datum = fallback(raw, exc)
            return (b"\x00", exact_text(raw)) if datum is None else b"\x02" + encode(datum)

    return piece


def row_plan(columns: Sequence[ColumnSpec], key_columns: Sequence[ColumnSpec],
             text: Sequence[Loader], binary: Sequence[Loader],
             encoders: Sequence[Encoder | None],
             fallback: Callable[[int, Any, BaseException], Any] | None = None) -> Any:
    """The RowPlan of a table version, or None (see the module docstring).

    `text`/`binary`: per column, pgtypes loader composed with the column's converter;
    `encoders`: per column, the hand encoder of its Avro type (None: fastavro's);
    `fallback(column index, raw, exc)`: the datum of a value a column's mapping refused."""
    if native is None or not columns or any(encode is None for encode in encoders):
        return None
    kinds = [_kind(column, native.ROW_KINDS) for column in columns]
    return native.RowPlan(
        bytes(kind for kind, _, _ in kinds),
        tuple(scale for _, scale, _ in kinds),
        tuple(digits for _, _, digits in kinds),
        tuple(_piece(load_text, load_binary, encode,  # type: ignore[arg-type]
                     None if fallback is None else partial(fallback, i))
              for i, (load_text, load_binary, encode)
              in enumerate(zip(text, binary, encoders, strict=True))),
        tuple(column.avro_name for column in columns),
        tuple(column.index for column in key_columns),
        UNCHANGED_TOAST,
    )
