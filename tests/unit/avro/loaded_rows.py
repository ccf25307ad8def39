"""Rows of loaded values (what pgtypes' loaders return) through a `TableCodec`'s writers.

The product loads pgoutput tuples itself (`change_from_tuples`); these helpers hand the same
writers Python values directly, so a test can cover every contract type and compare the bytes
with fastavro's without spelling each value in PostgreSQL's text format. Not a test module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connector.avro import SourceInfo, TableCodec, TransactionBlock
from connector.avro.table_codec import _branch
from connector.errors import SchemaError
from connector.pgoutput.messages import UNCHANGED_TOAST


def row(codec: TableCodec, values: Sequence[Any] | None,
        toast: list[str] | None = None) -> dict[str, Any] | None:
    """Loaded values -> {field: None | (branch, datum)}, the writers' input."""
    if values is None:
        return None
    columns = codec.schemas.columns
    if len(values) != len(columns):
        raise SchemaError(f"{codec.topic}: row of {len(values)} values for "
                          f"{len(columns)} columns")
    out: dict[str, Any] = {}
    for spec, value in zip(columns, values, strict=True):
        datum = None
        if value is UNCHANGED_TOAST:
            if toast is not None:
                toast.append(spec.avro_name)
        elif value is not None:
            datum = value if spec.convert is None else spec.convert(value)
        out[spec.avro_name] = None if datum is None else (_branch(spec.avro_type), datum)
    return out


def value(codec: TableCodec, op: str, before: Sequence[Any] | None,
          after: Sequence[Any] | None, source: SourceInfo, *, ts_ms: int | None = None,
          transaction: TransactionBlock | None = None) -> bytes:
    """The framed Envelope of a change given as rows of loaded values."""
    toast: list[str] = []
    return codec._envelope(op, row(codec, before), row(codec, after, toast), toast, source,
                           ts_ms, transaction)


def key(codec: TableCodec, values: Sequence[Any]) -> bytes | None:
    """The framed key of a row of loaded values (None: the table has no key)."""
    loaded = row(codec, values)
    assert loaded is not None
    return codec._key_of(loaded)
