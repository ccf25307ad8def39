"""An outbox payload column's values as Avro (connector/outbox.py, ``payload_format``): the
schema derived from the column's type, the datum from pgoutput's text or binary value.

* A **composite** payload (``CREATE TYPE order_event AS (...)``, a table's row type, or a
  domain over one) is an Avro record named after the type (namespace: its schema), one field
  ``["null", T]`` (default null) per live attribute in order, T by the one mapping of
  `typemap.column_codec` with the attribute's type, modifier and declared dimensions -- so an
  attribute is published exactly as a table column of its type would be. A nested composite
  attribute is a nested record (a type used twice is defined once and then named); an array of
  composites is refused (`ConfigError`: no mapping for it yet). The value's text is split by
  `pgtypes.record` and each attribute loaded by its type's loader.
* **Any other** payload type (``payload_format: avro``) is the column's own Avro type T (what
  the column would be in a table's Value record), e.g. jsonb's string named
  ``io.debezium.data.Json`` -- what Debezium's outbox router with the AvroConverter writes.

A NULL payload is a null Kafka value (no Avro), as with the payload stored as is.

Lossless: a value a string-typed attribute's mapping refuses is published as its exact text
(`fallback`, counted and warned once); one a typed attribute's mapping refuses (the typed
mappings are total over what PostgreSQL stores: a bug to report) stops pgcdc with one line.

Evolution: ``ALTER TYPE ... ADD/DROP ATTRIBUTE`` changes what record_out prints but sends no
new Relation message. A value whose attribute count (text) or attribute types (binary) differ
from the attributes known is `ShapeChanged`; `AvroPayload` then reads the type again and
derives (and registers) the new schema version, whose added fields are nullable with default
null: BACKWARD and FORWARD compatible with the one before, as table schemas are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from connector.errors import ConfigError, DecodeError
from connector.names import to_avro_name
from connector.pgtypes import Composite, TypeCatalog
from connector.pgtypes.record import parse_record_binary, parse_record_text

from .fallback import admits_text, exact_text, report_fallback
from .fastavro_io import framed_writer, parse_checked
from .schema import render
from .typemap import column_codec

__all__ = ["AvroPayload", "PayloadCodec", "ShapeChanged", "payload_codec"]

Load = Callable[[Any], Any]  # a value as sent (text or bytes) -> its Avro datum


class ShapeChanged(Exception):  # noqa: N818  (a signal, not an error: the caller re-reads)
    """A composite value's attributes are not those of the type as last read."""


class PayloadCodec(NamedTuple):
    """The Avro type of a payload column's (non-null) values and their datums."""

    schema: dict[str, Any]  # JSON-ready; a primitive is {"type": ...}
    text: Load  # pgoutput tuple kind 't' (str) -> datum
    binary: Load  # kind 'b' (bytes) -> datum


def payload_codec(catalog: TypeCatalog, type_oid: int, typmod: int = -1, dims: int = 1, *,
                  where: str, value_format: str = "pgcdc") -> PayloadCodec:
    """The codec of a payload column of type `type_oid` (module docstring). `where` names the
    column in errors and fallback reports (``outbox table public.outbox, column payload``).
    A composite's attributes must have been read (`SourceFacts.prepare_composite`)."""
    composite = catalog.composite(type_oid)
    if composite is not None:
        avro_type, text, binary = _Records(catalog, where, value_format).record(composite)
        return PayloadCodec(avro_type, text, binary)
    codec = column_codec(catalog, type_oid, typmod, dims, value_format=value_format)
    avro_type = codec.avro_type if isinstance(codec.avro_type, dict) \
        else {"type": codec.avro_type}
    text_load, binary_load = catalog.text_loader(type_oid, typmod), \
        catalog.binary_loader(type_oid, typmod)
    value = _value(codec.avro_type, codec.convert, where)
    return PayloadCodec(avro_type, lambda raw: value(text_load, raw),
                        lambda raw: value(binary_load, raw))


def _value(avro_type: Any, convert: Callable[[Any], Any] | None, where: str
           ) -> Callable[[Load, Any], Any]:
    """Load and convert one value, with the fallback rule (module docstring)."""

    def value(load: Load, raw: Any) -> Any:
        try:
            loaded = load(raw)
            return loaded if convert is None else convert(loaded)
        except (DecodeError, ValueError, ArithmeticError, TypeError) as exc:
            if not admits_text(avro_type):
                raise DecodeError(f"{where}: value {exact_text(raw)[:80]!r} does not fit its "
                                  f"Avro type {avro_type} ({exc}); please report it. To "
                                  "publish the payload as stored meanwhile: payload_format: "
                                  "stored") from None
            report_fallback(where.split(", ")[0], where, avro_type, raw, exc)
            return exact_text(raw)

    return value


class _Records:
    """Derives the record of a composite and of the composites nested in it."""

    def __init__(self, catalog: TypeCatalog, where: str, value_format: str) -> None:
        self.catalog = catalog
        self.where = where
        self.value_format = value_format
        self.defined: set[str] = set()  # full names: Avro defines a name once per schema

    def record(self, composite: Composite) -> tuple[Any, Load, Load]:
        """(Avro type, text loader, binary loader) of a composite's values."""
        name = f"{composite.namespace}.{composite.name}"
        if composite.attributes is None:
            raise ConfigError(f"{self.where}: the attributes of composite type {name} were "
                              "not read (pgcdc bug)")
        full = f"{to_avro_name(composite.namespace)}.{to_avro_name(composite.name)}"
        attributes = composite.attributes
        fields: list[dict[str, Any]] = []
        text_loads: list[Load] = []
        binary_loads: list[Load] = []
        types: list[int] = []
        for attribute in attributes:
            where = f"{self.where}, attribute {attribute.name}"
            nested = self.catalog.composite(attribute.type_oid)
            if nested is not None:
                avro_type, text, binary = self.record(nested)
                value = _value(avro_type, None, where)
                text_loads.append(_bind(value, text))
                binary_loads.append(_bind(value, binary))
            else:
                self._refuse_composite_arrays(attribute.type_oid, where)
                codec = column_codec(self.catalog, attribute.type_oid, attribute.type_modifier,
                                     max(attribute.dims, 1), value_format=self.value_format)
                avro_type = codec.avro_type
                value = _value(avro_type, codec.convert, where)
                text_load = self.catalog.text_loader(attribute.type_oid, attribute.type_modifier)
                binary_load = self.catalog.binary_loader(attribute.type_oid,
                                                         attribute.type_modifier)
                text_loads.append(_bind(value, text_load))
                binary_loads.append(_bind(value, binary_load))
            fields.append({"name": to_avro_name(attribute.name), "type": ["null", avro_type],
                           "default": None, "pg_name": attribute.name})
            types.append(attribute.type_oid)
        names = [str(f["name"]) for f in fields]
        if full in self.defined:
            schema: Any = full
        else:
            self.defined.add(full)
            schema = {"type": "record", "name": to_avro_name(composite.name),
                      "namespace": to_avro_name(composite.namespace), "fields": fields}
        return schema, _text_record(names, text_loads, name), \
            _binary_record(names, binary_loads, types, name)

    def _refuse_composite_arrays(self, type_oid: int, where: str) -> None:
        pg_type = self.catalog.get(type_oid)
        while pg_type is not None and pg_type.kind in ("array", "domain"):
            pg_type = self.catalog.get(pg_type.element_oid if pg_type.kind == "array"
                                       else pg_type.base_oid)
            if pg_type is not None and pg_type.kind == "composite":
                raise ConfigError(
                    f"{where} is an array of composite type {pg_type.namespace}."
                    f"{pg_type.name}, which pgcdc cannot map to Avro yet: make it a nested "
                    "composite, jsonb or text, or set payload_format: stored for this outbox")


def _bind(value: Callable[[Load, Any], Any], load: Load) -> Load:
    return lambda raw: value(load, raw)


def _text_record(names: list[str], loads: list[Load], type_name: str) -> Load:
    count = len(names)
    pairs = list(zip(names, loads, strict=True))

    def load(raw: str) -> dict[str, Any]:
        texts = parse_record_text(raw, type_name)
        if len(texts) != count and not (count == 0 and texts == [None]):
            raise ShapeChanged(f"{type_name}: {len(texts)} attributes, {count} known")
        return {name: None if text is None else attribute(text)
                for (name, attribute), text in zip(pairs, texts, strict=False)}

    return load


def _binary_record(names: list[str], loads: list[Load], types: list[int],
                   type_name: str) -> Load:
    pairs = list(zip(names, loads, strict=True))

    def load(raw: bytes) -> dict[str, Any]:
        values = parse_record_binary(raw, type_name)
        if [oid for oid, _ in values] != types:
            raise ShapeChanged(f"{type_name}: attribute types {[o for o, _ in values]}, "
                               f"{types} known")
        return {name: None if data is None else attribute(data)
                for (name, attribute), (_, data) in zip(pairs, values, strict=True)}

    return load


class AvroPayload:
    """One outbox table version's payload as Confluent-framed Avro: the codec derived by
    `derive` (``derive(True)``: after re-reading the type's attributes), its schema registered
    by `register` (topic, schema text -> id; the value subject of that topic, by the registry
    code every topic uses) once per routed topic and schema version."""

    def __init__(self, derive: Callable[[bool], PayloadCodec],
                 register: Callable[[str, str], int], where: str) -> None:
        self._derive = derive
        self._register = register
        self.where = where
        self.codec = derive(False)
        self._parsed = parse_checked(self.codec.schema, where)
        self._json = render(self.codec.schema)
        self._writers: dict[str, Callable[[Any], bytes]] = {}

    def encode(self, topic: str, raw: str | bytes | None) -> bytes | None:
        """The framed value of a payload (`raw`: as pgoutput sent it; None: NULL -> None)."""
        if raw is None:
            return None
        try:
            datum = self._datum(raw)
        except ShapeChanged:  # ALTER TYPE since the attributes were read: read them again
            self._renew()
            try:
                datum = self._datum(raw)
            except ShapeChanged as exc:
                raise DecodeError(
                    f"{self.where}: a payload's attributes do not match its type's ({exc}): "
                    "the type was altered again after this event was written; set "
                    "payload_format: stored for this outbox to publish its text") from None
        writer = self._writers.get(topic)
        if writer is None:
            writer = self._writers[topic] = framed_writer(
                self._parsed, self._register(topic, self._json))
        return writer(datum)

    def _datum(self, raw: str | bytes) -> Any:
        return self.codec.text(raw) if isinstance(raw, str) else self.codec.binary(raw)

    def _renew(self) -> None:
        self.codec = self._derive(True)
        self._parsed = parse_checked(self.codec.schema, self.where)
        self._json = render(self.codec.schema)
        self._writers.clear()  # each topic registers the new version at its next record
