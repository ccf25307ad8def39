"""Column masks: what a column's values become before they leave the producer (issue 37 part 2).

Configured per table in pgcdc.yaml, beside the column list and filter (docs/publishing.md)::

    table_settings:
      public.customers:
        mask: {email: hash, phone: null, name: {truncate: 3}, ssn: exclude}
    mask_salt: env:PGCDC_MASK_SALT      # the HMAC key of `hash` (env:/file: like any secret)
    mask_hash_encoding: hex             # or base64

* ``exclude``: the column is left out of the publication's column list
  (connector/replication/admin.py; on a user's publication, its owner leaves it out and pgcdc
  checks at start), so PostgreSQL never sends it. Should a Relation carry it all the same (the
  user's publication changed while running), the schema derivation refuses it: never published
  in clear.
* ``null``: the field keeps its Avro type and is always null.
* ``hash``: HMAC-SHA-256 keyed by the salt over the UTF-8 of the value's PostgreSQL text, hex
  or base64; the field becomes a ``string``. That text is the type's output function's (what
  pgoutput sends, COPY writes and ``format('%s', col)`` gives in SQL), under the settings every
  connection reading values pins (connector/pgtypes/session.py): not always ``col::text``,
  whose cast differs for boolean (``true`` for ``t``), char(n) (padding stripped), inet (a
  host's ``/32``) and xml (its declaration kept). docs/publishing.md gives the SQL that
  reproduces a hash; tests/integration/producer/test_producer_publication_settings.py checks
  it against what is published.
* ``truncate: N``: the first N characters of that text; the field becomes a ``string``.

One step, chosen once per table version: `derive_table_schemas` (schema.py) gives a masked
column its Avro type (`masked_type`) and a `ColumnMask` on its `ColumnSpec`; `TableCodec` then
loads that column with `masked_loaders` instead of its type's loader and converter, for every
row it writes -- stream and snapshots, ``before``, ``after`` and the key -- and the C row
encoder hands the column to those loaders (native_rows: a masked column is never parsed in C).

Invariant: a masked value is a function of the value's PostgreSQL text alone, whichever path
brought it. Text tuples and COPY text carry that text; a binary tuple's value is rendered to
it (`pg_text`) for the types whose text is exact from the binary form, and a hash or truncate of
any other type is refused with ``binary: true`` when the schema is derived. So a hashed key
hashes alike in the stream and in both snapshots, and the key and value records agree. The
masked loaders never raise (a value they cannot render is a bug, refused above), so a masked
column never reaches the fallback rule, which would publish and log the exact text.

The salt is in no repr, no schema and no message: only its HMAC outputs leave.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Literal
from uuid import UUID

from connector.errors import ConfigError, SchemaError
from connector.names import pattern_matches
from connector.pgtypes import TypeCatalog, oids

__all__ = ["HASH_ENCODINGS", "MASK_ATTRIBUTE", "ColumnMask", "MaskRule", "Masking",
           "check_binary", "masked_loaders", "masked_type", "parse_mask", "pg_text",
           "rules_summary"]

MaskKind = Literal["exclude", "null", "hash", "truncate"]
HASH_ENCODINGS: Final = ("hex", "base64")
#: The attribute (in ``connect.parameters``, so Kafka Connect keeps it) naming a field's mask.
MASK_ATTRIBUTE: Final = "pgcdc.mask"

# Types whose PostgreSQL text is exactly rendered from their binary value's loaded form.
_BINARY_RENDERED: Final = frozenset({
    oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME, oids.JSON, oids.INT2, oids.INT4,
    oids.INT8, oids.OID, oids.BOOL, oids.UUID, oids.BYTEA, oids.NUMERIC})


@dataclass(frozen=True, slots=True)
class MaskRule:
    """One column's mask as configured: `kind`, and `length` for truncate."""

    kind: MaskKind
    length: int = 0

    def describe(self) -> str:
        return f"truncate {self.length}" if self.kind == "truncate" else self.kind


def parse_mask(where: str, raw: Any) -> dict[str, MaskRule]:
    """A table setting's ``mask`` mapping (column -> exclude | null | hash | {truncate: N}) ->
    rules; a malformed one is one line naming `where`."""
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{where}: mask must map column names to exclude, null, hash or "
                          f"{{truncate: N}}, not {raw!r}")
    rules: dict[str, MaskRule] = {}
    for column, spec in raw.items():
        if not isinstance(column, str) or not column:
            raise ConfigError(f"{where}: mask: a key must be a column name, not {column!r}")
        if spec is None or spec in ("null", "exclude", "hash"):  # YAML `null` is None
            rules[column] = MaskRule("null" if spec is None else spec)
            continue
        length = spec.get("truncate") if isinstance(spec, dict) and len(spec) == 1 else None
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ConfigError(f"{where}: mask of column {column!r} must be exclude, null, hash "
                              f"or {{truncate: N}} (N >= 0 characters), not {spec!r}")
        rules[column] = MaskRule("truncate", length)
    return rules


@dataclass(frozen=True, slots=True)
class ColumnMask:
    """A column's mask as applied: the rule, the HMAC key (`salt`, never shown) and encoding."""

    rule: MaskRule
    salt: bytes = field(default=b"", repr=False)
    encoding: str = "hex"

    def describe(self) -> str:
        return f"hash-{self.encoding}" if self.rule.kind == "hash" else self.rule.describe()

    def text_mask(self) -> Callable[[str], str | None]:
        """PostgreSQL text -> the published datum."""
        kind = self.rule.kind
        if kind == "truncate":
            length = self.rule.length
            return lambda text: text[:length]
        if kind == "hash":
            salt, b64 = self.salt, self.encoding == "base64"

            def digest(text: str) -> str:
                mac = hmac.new(salt, text.encode("utf-8", "surrogatepass"), hashlib.sha256)
                return base64.b64encode(mac.digest()).decode() if b64 else mac.hexdigest()

            return digest
        return lambda text: None


@dataclass(frozen=True)
class Masking:
    """Every table's masks: `rules` in table_settings order ((pattern, {column: rule})), the
    salt, the hash encoding, and whether tuples come in binary (``binary: true``). Picklable,
    for the snapshot's reader processes."""

    rules: tuple[tuple[str, tuple[tuple[str, MaskRule], ...]], ...] = ()
    salt: bytes = field(default=b"", repr=False)
    encoding: str = "hex"
    binary: bool = False

    def rules_for(self, schema: str, table: str) -> dict[str, MaskRule]:
        """The rules of the first pattern matching the table (the table_settings rule: the
        first matching pattern gives all of a table's settings; none: no masks)."""
        for pattern, rules in self.rules:
            if pattern_matches(pattern, schema, table):
                return dict(rules)
        return {}

    def excluded_for(self, schema: str, table: str) -> tuple[str, ...]:
        """The table's excluded columns: never in its Relation (the publication's column list
        leaves them out), refused by `derive_table_schemas` if one is."""
        return tuple(c for c, rule in self.rules_for(schema, table).items()
                     if rule.kind == "exclude")

    def for_table(self, schema: str, table: str) -> dict[str, ColumnMask]:
        """Column -> mask applied to values (excluded columns are not sent: not listed)."""
        return {column: ColumnMask(rule, self.salt, self.encoding)
                for column, rule in self.rules_for(schema, table).items()
                if rule.kind != "exclude"}


def masked_type(mask: ColumnMask, avro_type: Any, connect_parameters: Mapping[str, str]
                ) -> Any:
    """A masked column's Avro type: null keeps the column's type (without its Connect default,
    a clear value); hash and truncate make it a plain ``string``. Either carries the mask in
    ``connect.parameters`` (with the source type parameters Debezium propagates)."""
    parameters = {**connect_parameters, MASK_ATTRIBUTE: mask.describe()}
    if mask.rule.kind == "null":
        typed = dict(avro_type) if isinstance(avro_type, dict) else {"type": avro_type}
        typed.pop("connect.default", None)
        typed["connect.parameters"] = {**typed.get("connect.parameters", {}), **parameters}
        return typed
    return {"type": "string", "connect.parameters": parameters}


def check_binary(mask: ColumnMask, catalog: TypeCatalog, type_oid: int, typmod: int,
                 table: str, column: str, binary: bool) -> None:
    """Refuse a hash or truncate whose text a binary tuple cannot give exactly."""
    if not binary or mask.rule.kind == "null":
        return
    resolved = catalog.resolve(type_oid, typmod)
    if resolved.kind in ("enum", "string") or (
            resolved.kind == "builtin" and resolved.oid in _BINARY_RENDERED):
        return
    raise SchemaError(f"column {column!r} of {table} (type {resolved.name}): a {mask.rule.kind} "
                      "mask needs the value's PostgreSQL text, which binary tuples give only "
                      "for text, integer, boolean, uuid, bytea, numeric and enum columns; set "
                      "binary: false")


def pg_text(value: Any) -> str:
    """PostgreSQL's text of a binary tuple's loaded value (the types `check_binary` admits)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, Decimal):
        if value.is_nan():
            return "NaN"
        if value.is_infinite():
            return "Infinity" if value > 0 else "-Infinity"
        return format(value, "f")
    raise TypeError(f"no PostgreSQL text for a {type(value).__name__}")


_FAILED: Final = "\x00unrenderable"  # hashed/truncated instead of a value: never its text


def masked_loaders(mask: ColumnMask, load_binary: Callable[[Any], Any]
                   ) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """(text loader, binary loader) of a masked column: raw value -> masked datum. They never
    raise: a binary value that cannot be rendered (excluded by `check_binary`) is masked as a
    fixed marker, never published or logged in clear."""
    apply = mask.text_mask()
    if mask.rule.kind == "null":
        return (lambda raw: None), (lambda raw: None)

    def from_binary(raw: Any) -> Any:
        try:
            value = load_binary(raw)
            return None if value is None else apply(pg_text(value))
        except Exception:
            return apply(_FAILED)

    return apply, from_binary


def rules_summary(rules: Mapping[str, MaskRule], columns: Sequence[str] | None = None) -> str:
    """``masks: email hash, name truncate 3; excluded: ssn`` (for ``pgcdc status``)."""
    shown = [f"{c} {r.describe()}" for c, r in rules.items() if r.kind != "exclude"
             and (columns is None or c in columns)]
    excluded = [c for c, r in rules.items() if r.kind == "exclude"]
    parts = []
    if shown:
        parts.append("masks: " + ", ".join(shown))
    if excluded:
        parts.append("excluded: " + ", ".join(excluded))
    return "; ".join(parts)
