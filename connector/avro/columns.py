"""One column's Avro type and value converter: pgtypes' mapping, held to the event contract.

`connector.pgtypes.avro` maps every PostgreSQL type to an Avro fragment and a converter; this
module uses it as is except where schemas/README.md says otherwise (each difference below is
the contract's rule):

* ``timestamp`` (without time zone): ``local-timestamp-micros`` (pgtypes: timestamp-micros;
  the datum -- the wall clock's microseconds since 1970-01-01 -- is the same);
* ``json``/``jsonb``: string with ``"connect.name": "io.debezium.data.Json"``;
* ``money``: string (PostgreSQL's exact amount, e.g. ``-12.34``), not decimal;
* arrays: ``dims`` nested Avro arrays, innermost items ``["null", T]`` (pgtypes flattens every
  array to one level). pgoutput does not tell a column's dimensions: the pipeline passes
  ``pg_attribute.attndims`` (see `ARRAY_DIMS_QUERY` in `connector.avro.schema`; 0 or unknown
  means 1). A value with more dimensions than its column declares has its excess dimensions
  flattened in row-major order; a value with fewer is wrapped (``{1,2}`` in an ``int[][]``
  column is ``[[1, 2]]``); an empty array is ``[]``.

Converters are chosen once per column; `None` stands for "the loaded value is already the
datum" so the row loop can skip the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from connector.pgtypes import TypeCatalog, avro_converter, avro_schema, oids
from connector.pgtypes.catalog import ResolvedType

__all__ = ["JSON_CONNECT_NAME", "ColumnCodec", "column_codec"]

Converter = Callable[[Any], Any]

JSON_CONNECT_NAME: Final = "io.debezium.data.Json"
_IDENTITY: Final = avro_converter(TypeCatalog(), oids.INT4)  # pgtypes' "already a datum"
_TO_STRING: Final = avro_converter(TypeCatalog(), oids.TEXT)  # pgtypes' "any value as text"
_STRING_OVERRIDES: Final[dict[int, Any]] = {
    oids.JSON: {"type": "string", "connect.name": JSON_CONNECT_NAME},
    oids.JSONB: {"type": "string", "connect.name": JSON_CONNECT_NAME},
    oids.MONEY: "string",
}
_LOCAL_TIMESTAMP: Final = {"type": "long", "logicalType": "local-timestamp-micros"}


class ColumnCodec(NamedTuple):
    """The Avro type of a column's values (not yet nullable) and how to turn values into it."""

    avro_type: Any  # str | dict | list, JSON-ready
    convert: Converter | None  # None: the loaded value is the datum already


def column_codec(catalog: TypeCatalog, type_oid: int, typmod: int = -1,
                 dims: int = 1) -> ColumnCodec:
    """The codec of a column of type `type_oid` (`dims`: declared array dimensions)."""
    resolved = catalog.resolve(type_oid, typmod)
    if resolved.kind != "array":
        return _scalar(catalog, resolved)
    element = resolved.element
    while element is not None and element.kind == "array":  # arrays of array domains
        element = element.element
    assert element is not None
    inner = _scalar(catalog, element)
    depth = max(dims, 1)
    avro_type: Any = {"type": "array", "items": ["null", inner.avro_type]}
    for _ in range(depth - 1):
        avro_type = {"type": "array", "items": avro_type}
    return ColumnCodec(avro_type, _array_converter(inner.convert, depth))


def _scalar(catalog: TypeCatalog, resolved: ResolvedType) -> ColumnCodec:
    if resolved.kind == "builtin":
        override = _STRING_OVERRIDES.get(resolved.oid)
        if override is not None:
            return ColumnCodec(_copy(override), _TO_STRING)
        if resolved.oid == oids.TIMESTAMP:
            convert = avro_converter(catalog, resolved.oid, resolved.typmod)
            return ColumnCodec(dict(_LOCAL_TIMESTAMP), convert)
    avro_type = avro_schema(catalog, resolved.oid, resolved.typmod)
    convert = avro_converter(catalog, resolved.oid, resolved.typmod)
    return ColumnCodec(_copy(avro_type), None if convert is _IDENTITY else convert)


def _copy(avro_type: Any) -> Any:
    if isinstance(avro_type, dict):
        return {k: _copy(v) for k, v in avro_type.items()}
    if isinstance(avro_type, list):
        return [_copy(v) for v in avro_type]
    return avro_type


def _flatten(value: list[Any], out: list[Any]) -> None:
    for item in value:
        if isinstance(item, list):
            _flatten(item, out)
        else:
            out.append(item)


def _depth(value: list[Any]) -> int:
    depth = 1
    while value and isinstance(value[0], list):
        value = value[0]
        depth += 1
    return depth


def _array_converter(element: Converter | None, dims: int) -> Converter:
    def leaf(items: list[Any]) -> list[Any]:
        flat: list[Any] = []
        _flatten(items, flat)
        if element is None:
            return flat
        return [None if item is None else element(item) for item in flat]

    def level(items: list[Any], remaining: int) -> list[Any]:
        if remaining == 1:
            return leaf(items)
        return [level(item if isinstance(item, list) else [item], remaining - 1)
                for item in items]

    def convert(value: Any) -> Any:
        if not isinstance(value, list) or not value:
            return value
        if dims == 1 and not any(isinstance(item, list) for item in value):  # the usual case
            if element is None:
                return value
            return [None if item is None else element(item) for item in value]
        have = _depth(value)
        while have < dims:
            value = [value]
            have += 1
        return level(value, dims)

    return convert
