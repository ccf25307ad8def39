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
new Relation message, and the catalog pgcdc can read is today's, not that of the change being
decoded (which may be older: pgcdc was behind, or restarted). A value whose attribute count
(text) or attribute types (binary) differ from the attributes known is `ShapeChanged`;
`AvroPayload` then reads the type again and takes the version with that many attributes: today's,
or -- a value written before attributes were added -- the first ``n`` of today's, which is
exactly what the type had then when no attribute was dropped before the ``n``-th
(`Composite.intact`). A value whose shape cannot be known so (an attribute dropped since, or
dropped and added between two reads) stops pgcdc with one line. Each version is registered as
it is first used; added fields are nullable with default null, so each version is BACKWARD
and FORWARD compatible with the one before, as table schemas are. (An attribute's changed
type, ``ALTER ATTRIBUTE ... TYPE``, keeps the count: values written before it are read with
today's type, and one that does not load as that type is published by the fallback rule or
stops pgcdc as above.) Nested composites are read as they are today.
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
    """A composite value's attributes are not those of the type as last read; `count`: how
    many the value has (-1: a nested composite's do not match, read as they are today)."""

    def __init__(self, count: int, detail: str) -> None:
        super().__init__(detail)
        self.count = count


class PayloadCodec(NamedTuple):
    """The Avro type of a payload column's (non-null) values and their datums."""

    schema: dict[str, Any]  # JSON-ready; a primitive is {"type": ...}
    text: Load  # pgoutput tuple kind 't' (str) -> datum
    binary: Load  # kind 'b' (bytes) -> datum
    attributes: int | None = None  # a composite's: how many (its version)


def payload_codec(catalog: TypeCatalog, type_oid: int, typmod: int = -1, dims: int = 1, *,
                  where: str, value_format: str = "pgcdc",
                  attributes: int | None = None) -> PayloadCodec:
    """The codec of a payload column of type `type_oid` (module docstring). `where` names the
    column in errors and fallback reports (``outbox table public.outbox, column payload``).
    A composite's attributes must have been read (`SourceFacts.prepare_composite`);
    `attributes`: only its first so many (a value written before the others were added), which
    `DecodeError` refuses when that is not a version the type had."""
    composite = catalog.composite(type_oid)
    if composite is not None:
        live = len(composite.attributes or ())
        if attributes is not None and attributes != live and attributes > composite.intact:
            raise DecodeError(
                f"{where}: a payload has {attributes} attributes, type {composite.namespace}."
                f"{composite.name} has {live} now, and attributes were dropped since it was "
                "written, so pgcdc cannot tell which they are; set payload_format: stored for "
                "this outbox until such events are published")
        avro_type, text, binary = _Records(catalog, where, value_format).record(composite,
                                                                                attributes)
        return PayloadCodec(avro_type, text, binary, live if attributes is None else attributes)
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

    def record(self, composite: Composite, count: int | None = None
               ) -> tuple[Any, Load, Load]:
        """(Avro type, text loader, binary loader) of a composite's values (of its first
        `count` attributes: None, all)."""
        name = f"{composite.namespace}.{composite.name}"
        if composite.attributes is None:
            raise ConfigError(f"{self.where}: the attributes of composite type {name} were "
                              "not read (pgcdc bug)")
        full = f"{to_avro_name(composite.namespace)}.{to_avro_name(composite.name)}"
        attributes = composite.attributes[:count]
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
                text_loads.append(_bind(value, _nested(text)))
                binary_loads.append(_bind(value, _nested(binary)))
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


def _nested(load: Load) -> Load:
    """A nested composite's loader: its shape change is no attribute count of the payload."""

    def nested(raw: Any) -> Any:
        try:
            return load(raw)
        except ShapeChanged as exc:
            raise ShapeChanged(-1, str(exc)) from None

    return nested


def _text_record(names: list[str], loads: list[Load], type_name: str) -> Load:
    count = len(names)
    pairs = list(zip(names, loads, strict=True))

    def load(raw: str) -> dict[str, Any]:
        texts = parse_record_text(raw, type_name)
        if len(texts) != count and not (count == 0 and texts == [None]):
            raise ShapeChanged(len(texts), f"{type_name}: {len(texts)} attributes, {count} known")
        return {name: None if text is None else attribute(text)
                for (name, attribute), text in zip(pairs, texts, strict=False)}

    return load


def _binary_record(names: list[str], loads: list[Load], types: list[int],
                   type_name: str) -> Load:
    pairs = list(zip(names, loads, strict=True))

    def load(raw: bytes) -> dict[str, Any]:
        values = parse_record_binary(raw, type_name)
        if [oid for oid, _ in values] != types:
            raise ShapeChanged(len(values), f"{type_name}: attribute types "
                               f"{[o for o, _ in values]}, {types} known")
        return {name: None if data is None else attribute(data)
                for (name, attribute), (_, data) in zip(pairs, values, strict=True)}

    return load


class _Version:
    """One schema version of a payload: its codec, its parsed schema and one writer per
    routed topic (registered there at the topic's first record)."""

    def __init__(self, codec: PayloadCodec, where: str) -> None:
        self.codec = codec
        self.parsed = parse_checked(codec.schema, where)
        self.json = render(codec.schema)
        self.writers: dict[str, Callable[[Any], bytes]] = {}

    def datum(self, raw: str | bytes) -> Any:
        return self.codec.text(raw) if isinstance(raw, str) else self.codec.binary(raw)


class AvroPayload:
    """One outbox table version's payload as Confluent-framed Avro: the codec derived by
    ``derive(refresh, attributes)`` (`payload_codec`; `refresh`: read the type's attributes
    again first), its schema registered by `register` (topic, schema text -> id; the value
    subject of that topic, by the registry code every topic uses) once per routed topic and
    schema version. After ALTER TYPE the version a value needs is found as the module
    docstring says."""

    def __init__(self, derive: Callable[[bool, int | None], PayloadCodec],
                 register: Callable[[str, str], int], where: str) -> None:
        self._derive = derive
        self._register = register
        self.where = where
        self.current = _Version(derive(False, None), where)
        self._older: dict[int, _Version] = {}  # by attribute count: values written before ADD

    def encode(self, topic: str, raw: str | bytes | None) -> bytes | None:
        """The framed value of a payload (`raw`: as pgoutput sent it; None: NULL -> None)."""
        if raw is None:
            return None
        version = self.current
        try:
            datum = version.datum(raw)
        except ShapeChanged as exc:
            version = self._version_of(exc.count)
            try:
                datum = version.datum(raw)
            except ShapeChanged as again:
                raise DecodeError(
                    f"{self.where}: a payload's attributes match no version of its type pgcdc "
                    f"can read ({again}): the type was altered since this event was written; "
                    "set payload_format: stored for this outbox until such events are "
                    "published") from None
        writer = version.writers.get(topic)
        if writer is None:
            writer = version.writers[topic] = framed_writer(
                version.parsed, self._register(topic, version.json))
        return writer(datum)

    def _version_of(self, count: int) -> _Version:
        """The version of a value with `count` attributes: today's (read again), or an older
        one of the first `count` attributes."""
        older = self._older.get(count)
        if older is not None:
            return older
        self.current = _Version(self._derive(True, None), self.where)
        self._older.clear()  # derived from the catalog as read before
        if count < 0 or self.current.codec.attributes == count:
            return self.current
        older = self._older[count] = _Version(self._derive(False, count), self.where)
        return older
