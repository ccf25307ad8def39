"""The type catalog: which loader (and Avro type) each type OID gets.

A :class:`TypeCatalog` knows PostgreSQL's built-in types from the start and learns user types
(enums, domains, their arrays, arrays of arrays of them...) from two sources:

* pgoutput **Type** messages (:meth:`TypeCatalog.register_type_message`): they carry the OID
  of the column's type but the namespace and name of its *base* type (pgoutput calls
  ``getBaseType``), so a domain over a built-in type or over an already known type is resolved
  from the stream alone. An enum or composite cannot be told apart this way.
* a ``pg_type`` query done by the producer at its IO edge (:data:`CATALOG_QUERY`, rows to
  :meth:`TypeCatalog.add_rows`), for the OIDs :meth:`TypeCatalog.needs_lookup` names.

A domain is always looked up, even when a Type message named its base type: the message
carries neither the domain's type modifier (``numeric(8,2)``) nor the domains in between, and a
domain over a domain has none in its column either. Looking it up does not race with DDL: a
domain's base type and modifier never change (``ALTER DOMAIN`` cannot change them; a new
definition is a new OID), so whenever the lookup runs it finds what the change was written
with. Only a domain dropped before the lookup keeps the Type message's answer (its base type
without modifier: an unbounded numeric's string).

Until a type is known its values load as :class:`~connector.pgtypes.values.Unknown` (the text
or bytes exactly as sent, flagged): nothing is guessed, nothing is lost.

Loaders are chosen once per relation (:meth:`TypeCatalog.row_loaders`), then the per-value
hot path is a call of the chosen function.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, overload

from connector.errors import DecodeError

from . import array, datetime, json, misc, net, numeric, oids, text
from ._base import BinaryLoader, TextLoader, identity, utf8
from .values import Unknown

__all__ = [
    "CATALOG_QUERY",
    "COMPOSITE_QUERY",
    "ColumnType",
    "Composite",
    "CompositeAttribute",
    "PgType",
    "ResolvedType",
    "RowLoaders",
    "TypeCatalog",
    "TypeKind",
]

TypeKind = Literal[
    "base", "array", "enum", "domain", "composite", "range", "multirange", "pseudo", "unknown"
]
_TYPTYPE_KIND: dict[str, TypeKind] = {
    "b": "base", "c": "composite", "d": "domain", "e": "enum", "m": "multirange",
    "p": "pseudo", "r": "range",
}  # fmt: skip
_MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class PgType:
    """What the catalog knows of one type (a row of ``pg_type``, or less)."""

    oid: int
    name: str
    namespace: str = "pg_catalog"
    kind: TypeKind = "base"
    base_oid: int = 0  # domain: the type it is over (typbasetype)
    base_typmod: int = -1  # domain: its type modifier, e.g. numeric(10,2)'s (typtypmod)
    element_oid: int = 0  # array: its element type (typelem)
    array_oid: int = 0  # the array type over this one, if any (typarray)
    delimiter: str = ","  # separates elements of this type in array text (typdelim)
    category: str = ""  # typcategory: "S" string-like, "N" numeric...
    #: only what a pgoutput Type message says (the base type, not its type modifier nor the
    #: domains between): :meth:`TypeCatalog.needs_lookup` still asks for the ``pg_type`` row
    from_type_message: bool = False


class ResolvedType(NamedTuple):
    """A type with its domains peeled off: what the values really are.

    ``kind`` is ``builtin`` (``oid`` is one of :mod:`~connector.pgtypes.oids`), ``array``
    (``element`` says of what), ``enum``, ``string`` (a user base type of the string category,
    e.g. citext) or ``unknown``. ``typmod`` is the column's, or the domain's when the column
    has none.
    """

    kind: Literal["builtin", "array", "enum", "string", "unknown"]
    oid: int
    typmod: int
    name: str
    element: ResolvedType | None = None
    delimiter: str = ","


class ColumnType(Protocol):
    """A Relation message's column, as far as types go."""

    @property
    def type_oid(self) -> int: ...

    @property
    def type_modifier(self) -> int: ...


class RowLoaders(NamedTuple):
    """One relation's loaders, one per column, for each tuple format.

    pgoutput says per value whether it is text (``t``) or binary (``b``), so both are ready:
    ``value = loaders.binary[i](raw) if kind == "b" else loaders.text[i](raw)``.
    """

    text: tuple[TextLoader, ...]
    binary: tuple[BinaryLoader, ...]


#: The ``pg_type`` rows :meth:`TypeCatalog.add_rows` takes, for the OIDs given as one
#: parameter (an ``oid[]``; psycopg: ``conn.execute(CATALOG_QUERY, [list_of_oids])``),
#: following domains and array elements down to built-in types.
CATALOG_QUERY = """\
WITH RECURSIVE wanted(oid) AS (
    SELECT unnest(%s::oid[])
  UNION
    SELECT x.oid
    FROM wanted w
    JOIN pg_catalog.pg_type t ON t.oid = w.oid
    CROSS JOIN LATERAL (VALUES (t.typbasetype), (t.typelem), (t.typarray)) AS x(oid)
    WHERE x.oid <> 0
)
SELECT t.oid::int8, n.nspname::text, t.typname::text, t.typtype::text,
       t.typbasetype::int8, t.typtypmod, t.typelem::int8, t.typarray::int8,
       t.typlen::int4, t.typdelim::text, t.typcategory::text,
       t.typinput = 'pg_catalog.array_in'::pg_catalog.regproc
FROM wanted w
JOIN pg_catalog.pg_type t ON t.oid = w.oid
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
"""

#: The attributes of the composite types given as one ``oid[]`` parameter, in order (the order
#: record_out prints the live ones in), dropped ones flagged: rows for
#: :meth:`TypeCatalog.add_composite_rows`.
COMPOSITE_QUERY = """\
SELECT t.oid::int8, a.attname::text, a.atttypid::int8, a.atttypmod, a.attndims::int4,
       a.attisdropped
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid
WHERE t.oid = ANY(%s::oid[]) AND a.attnum > 0
ORDER BY t.oid, a.attnum
"""


class CompositeAttribute(NamedTuple):
    """One live attribute of a composite type (a row of ``pg_attribute``)."""

    name: str
    type_oid: int
    type_modifier: int
    dims: int  # attndims: declared array dimensions (0: not declared as an array)


class Composite(NamedTuple):
    """A composite type (its domains peeled off) and its live attributes as last read.

    ``intact``: how many of them come before the first dropped one. Attributes are only ever
    appended (``ADD ATTRIBUTE`` takes the next attnum), so a value written when the type had
    ``n <= intact`` attributes had exactly the first ``n`` of today's: its shape is known
    without the catalog of its time. Past ``intact`` it is not (a dropped attribute may have
    been live then)."""

    oid: int
    name: str
    namespace: str
    attributes: tuple[CompositeAttribute, ...] | None  # None: not read yet
    intact: int = 0


PgTypeRow = tuple[int, str, str, str, int, int, int, int, int, str, str, bool]

_TEXT_LOADERS: dict[int, TextLoader] = {}
_BINARY_LOADERS: dict[int, BinaryLoader] = {}
for _family in (numeric, misc, text, datetime, net, json):
    _TEXT_LOADERS.update(_family.TEXT_LOADERS)
    _BINARY_LOADERS.update(_family.BINARY_LOADERS)


def _builtin_types() -> dict[int, PgType]:
    types = {}
    for oid, name in oids.NAMES.items():
        array_oid = oids.ARRAY_OF.get(oid, 0)
        category = "S" if oid in (oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME) else ""
        types[oid] = PgType(oid, name, array_oid=array_oid, category=category)
        if array_oid:
            types[array_oid] = PgType(array_oid, "_" + name, kind="array", element_oid=oid)
    for oid, element in oids.VECTOR_OF.items():  # int2vector, oidvector: arrays of their own
        name = oids.NAMES[element] + "vector"
        array_oid = oids.VECTOR_ARRAY_OF[oid]
        types[oid] = PgType(oid, name, kind="array", element_oid=element, array_oid=array_oid)
        types[array_oid] = PgType(array_oid, "_" + name, kind="array", element_oid=oid)
    return types


_BUILTINS = _builtin_types()


def _unknown_text(oid: int) -> TextLoader:
    def load(data: str) -> Unknown:
        return Unknown(oid, data)

    return load


def _unknown_binary(oid: int) -> BinaryLoader:
    def load(data: bytes) -> Unknown:
        return Unknown(oid, bytes(data))

    return load


def _string_binary(oid: int) -> BinaryLoader:
    """A string-category user type (citext...) whose send form is, as far as we can tell, its
    UTF-8 text; anything that is not UTF-8 is kept as Unknown rather than failing."""

    def load(data: bytes) -> str | Unknown:
        try:
            return data.decode()
        except UnicodeDecodeError:
            return Unknown(oid, bytes(data))

    return load


def _column(column: ColumnType | tuple[int, int] | int) -> tuple[int, int]:
    """A column's (type OID, type modifier): from its attributes when it has them (a Relation
    message's column, even a NamedTuple), else from an ``(oid, typmod)`` pair or a bare OID."""
    if isinstance(column, int):
        return column, -1
    if isinstance(column, tuple) and not hasattr(column, "type_oid"):
        return column[0], column[1]
    typed: ColumnType = column  # type: ignore[assignment]  # a NamedTuple column is both
    return typed.type_oid, typed.type_modifier


class TypeCatalog:
    """Type OID -> loader and Avro type; starts with the built-ins, learns user types.

    ``money_frac_digits`` is the number of fraction digits of the server's ``lc_monetary``
    currency (2 for C/POSIX and most locales); money values are scaled by it.

    One catalog per database (type OIDs are per database); not thread-safe, like the rest
    of a replication stream's state.
    """

    def __init__(self, *, money_frac_digits: int = numeric.MONEY_FRAC_DIGITS) -> None:
        self.money_frac_digits = money_frac_digits
        #: bumped whenever a type is learned: loaders built before may be stale
        self.generation = 0
        self._types: dict[int, PgType] = dict(_BUILTINS)
        self._by_name = {(t.namespace, t.name): t.oid for t in self._types.values()}
        self._attributes: dict[int, tuple[tuple[CompositeAttribute, ...], int]] = {}
        self._text_cache: dict[int, TextLoader] = {}
        self._binary_cache: dict[int, BinaryLoader] = {}
        self._text = dict(_TEXT_LOADERS)
        self._binary = dict(_BINARY_LOADERS)
        if money_frac_digits != numeric.MONEY_FRAC_DIGITS:
            self._text[oids.MONEY] = numeric.money_text_loader(money_frac_digits)
            self._binary[oids.MONEY] = numeric.money_binary_loader(money_frac_digits)

    def __repr__(self) -> str:
        user = len(self._types) - len(_BUILTINS)
        return f"TypeCatalog({user} user types, money_frac_digits={self.money_frac_digits})"

    # ------------------------------------------------------------------ learning types

    def add(self, pg_type: PgType) -> None:
        """Learn (or replace what was known of) one type."""
        if pg_type.oid in _BUILTINS:
            return  # built-ins are known exactly already
        self._types[pg_type.oid] = pg_type
        self._by_name[(pg_type.namespace, pg_type.name)] = pg_type.oid
        self._text_cache.clear()
        self._binary_cache.clear()
        self.generation += 1

    def register_enum(
        self, oid: int, name: str, *, namespace: str = "public", array_oid: int = 0
    ) -> None:
        """An enum type (its values load as their label, ``str``), and its array type."""
        self.add(PgType(oid, name, namespace, "enum", array_oid=array_oid))
        if array_oid:
            self.register_array(array_oid, oid, name="_" + name, namespace=namespace)

    def register_domain(
        self,
        oid: int,
        base_oid: int,
        *,
        name: str = "",
        namespace: str = "public",
        base_typmod: int = -1,
        array_oid: int = 0,
    ) -> None:
        """A domain over ``base_oid`` (loaded as its base type), and its array type."""
        self.add(
            PgType(oid, name or f"domain_{oid}", namespace, "domain", base_oid, base_typmod,
                   array_oid=array_oid)
        )  # fmt: skip
        if array_oid:
            self.register_array(array_oid, oid, name="_" + (name or f"domain_{oid}"),
                                namespace=namespace)  # fmt: skip

    def register_array(
        self, oid: int, element_oid: int, *, name: str = "", namespace: str = "public"
    ) -> None:
        """An array type over ``element_oid``."""
        self.add(PgType(oid, name or f"array_{oid}", namespace, "array", element_oid=element_oid))

    def register_type_message(self, oid: int, namespace: str, name: str) -> None:
        """What a pgoutput Type message says: ``oid`` (the column's type) is, or is a domain
        over, the type named ``namespace.name`` (``""`` is pg_catalog)."""
        namespace = namespace or "pg_catalog"
        known = self._types.get(oid)
        if known is not None and known.kind != "unknown":
            return  # a catalog row (or the built-ins) already said more
        target = self._by_name.get((namespace, name))
        if target is not None and target != oid:
            self.add(PgType(oid, f"{namespace}.{name}", namespace, "domain", target,
                            from_type_message=True))
        elif target is None:
            self.add(PgType(oid, name, namespace, "unknown"))

    def add_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Learn the types of :data:`CATALOG_QUERY`'s rows."""
        for row in rows:
            oid, nspname, typname, typtype, typbasetype, typtypmod, typelem, typarray, typlen, \
                typdelim, typcategory = row[:11]  # fmt: skip
            # an array is what array_in reads (the 12th column); without it, guess from the
            # shape: a varlena with an element type (but a type with its own input function,
            # like int2vector, is no such array: its text would not parse)
            array_in = bool(row[11]) if len(row) > 11 else bool(typelem) and typlen == -1
            kind = _TYPTYPE_KIND.get(str(typtype), "unknown")
            if kind == "base" and typelem and array_in:
                kind = "array"
            self.add(
                PgType(
                    oid=int(oid),
                    name=str(typname),
                    namespace=str(nspname),
                    kind=kind,
                    base_oid=int(typbasetype),
                    base_typmod=int(typtypmod),
                    element_oid=int(typelem) if kind == "array" else 0,
                    array_oid=int(typarray),
                    delimiter=str(typdelim) or ",",
                    category=str(typcategory),
                )
            )

    def add_composite_rows(self, type_oids: Iterable[int],
                           rows: Iterable[Sequence[Any]]) -> None:
        """Learn (again) the attributes of the composites `type_oids` from
        :data:`COMPOSITE_QUERY`'s rows for them (a type without rows has none)."""
        found: dict[int, list[CompositeAttribute]] = {int(oid): [] for oid in type_oids}
        intact: dict[int, int] = {}
        for row in rows:  # in attnum order; the 6th column (attisdropped) may be left out
            oid = int(row[0])
            live = found.setdefault(oid, [])
            if len(row) > 5 and row[5]:
                intact.setdefault(oid, len(live))
                continue
            live.append(CompositeAttribute(str(row[1]), int(row[2]), int(row[3]), int(row[4])))
        for oid, attributes in found.items():
            self._attributes[oid] = (tuple(attributes), intact.get(oid, len(attributes)))
        self.generation += 1

    # ------------------------------------------------------------------ resolving

    def get(self, oid: int) -> PgType | None:
        """What is known of ``oid``, or None."""
        return self._types.get(oid)

    def composite(self, oid: int) -> Composite | None:
        """The composite type `oid` is, or is a domain over (None: not a composite, or its
        ``pg_type`` row is not known yet)."""
        for _ in range(_MAX_DEPTH):
            pg_type = self._types.get(oid)
            if pg_type is None:
                return None
            if pg_type.kind == "composite":
                attributes, intact = self._attributes.get(oid, (None, 0))
                return Composite(oid, pg_type.name, pg_type.namespace, attributes, intact)
            if pg_type.kind != "domain":
                return None
            oid = pg_type.base_oid
        return None

    def is_known(self, oid: int) -> bool:
        """Whether values of ``oid`` load to real values (not :class:`Unknown`)."""
        return self._known(self.resolve(oid))

    def _known(self, resolved: ResolvedType) -> bool:
        if resolved.kind == "array":
            assert resolved.element is not None
            return self._known(resolved.element)
        return resolved.kind != "unknown"

    def needs_lookup(self, type_oids: Iterable[int]) -> list[int]:
        """The OIDs among ``type_oids`` (columns' types) the catalog lacks a ``pg_type`` row
        for (itself, or a domain's base, or an array's element): run :data:`CATALOG_QUERY`
        for them. Types whose row is known but that have no loader (composites, ranges) are
        not listed again: their values stay :class:`Unknown`."""
        return sorted({oid for oid in type_oids if self._lacks_row(oid, 0)})

    def _lacks_row(self, oid: int, depth: int) -> bool:
        pg_type = self._types.get(oid)
        if pg_type is None or pg_type.kind == "unknown" or pg_type.from_type_message:
            return True
        if depth > _MAX_DEPTH:
            return False  # a cycle: resolve() reports it
        if pg_type.kind == "domain":
            return self._lacks_row(pg_type.base_oid, depth + 1)
        if pg_type.kind == "array":
            return self._lacks_row(pg_type.element_oid, depth + 1)
        return False

    def resolve(self, oid: int, typmod: int = -1) -> ResolvedType:
        """``oid`` with its domains peeled off (their type modifier kept if the column has
        none), arrays resolved down to their elements."""
        return self._resolve(oid, typmod, 0)

    def _resolve(self, oid: int, typmod: int, depth: int) -> ResolvedType:
        if depth > _MAX_DEPTH:
            raise DecodeError(f"type {oid}: domains or arrays nested over {_MAX_DEPTH} deep")
        pg_type = self._types.get(oid)
        if pg_type is None:
            return ResolvedType("unknown", oid, typmod, f"type {oid}")
        if pg_type.kind == "domain":
            base_typmod = typmod if typmod != -1 else pg_type.base_typmod
            return self._resolve(pg_type.base_oid, base_typmod, depth + 1)
        if pg_type.kind == "array":
            element = self._resolve(pg_type.element_oid, typmod, depth + 1)
            if oid in oids.VECTOR_OF:
                return ResolvedType("array", oid, typmod, pg_type.name, element, " ")
            element_type = self._types.get(pg_type.element_oid)
            delimiter = element_type.delimiter if element_type else ","
            return ResolvedType("array", oid, typmod, element.name + "[]", element, delimiter)
        if oid in oids.NAMES:
            return ResolvedType("builtin", oid, typmod, pg_type.name)
        if pg_type.kind == "enum":
            return ResolvedType("enum", oid, typmod, pg_type.name)
        if pg_type.kind == "base" and pg_type.category == "S":
            return ResolvedType("string", oid, typmod, pg_type.name)
        return ResolvedType("unknown", oid, typmod, pg_type.name)

    # ------------------------------------------------------------------ loaders

    def text_loader(self, oid: int, typmod: int = -1) -> TextLoader:
        """The text-format (tuple kind ``t``) loader of a column of type ``oid``."""
        loader = self._text_cache.get(oid)
        if loader is None:
            loader = self._text_cache[oid] = self._text_for(self.resolve(oid, typmod))
        return loader

    def binary_loader(self, oid: int, typmod: int = -1) -> BinaryLoader:
        """The binary-format (tuple kind ``b``) loader of a column of type ``oid``."""
        loader = self._binary_cache.get(oid)
        if loader is None:
            loader = self._binary_cache[oid] = self._binary_for(self.resolve(oid, typmod))
        return loader

    def _text_for(self, resolved: ResolvedType) -> TextLoader:
        kind = resolved.kind
        if kind == "builtin":
            return self._text[resolved.oid]
        if kind == "array":
            assert resolved.element is not None
            if resolved.oid in oids.VECTOR_OF:
                return array.vector_text_loader(self._text_for(resolved.element), resolved.name)
            return array.array_text_loader(
                self._text_for(resolved.element), resolved.name, resolved.delimiter,
                nested=resolved.element.kind == "array",
            )
        if kind in ("enum", "string"):
            return identity
        return _unknown_text(resolved.oid)

    def _binary_for(self, resolved: ResolvedType) -> BinaryLoader:
        kind = resolved.kind
        if kind == "builtin":
            return self._binary[resolved.oid]
        if kind == "array":
            assert resolved.element is not None
            element = resolved.element
            fixed = array.FIXED_WIDTH.get(element.oid) if element.kind == "builtin" else None
            return array.array_binary_loader(self._binary_for(element), resolved.name, fixed)
        if kind == "enum":
            return utf8(resolved.name)
        if kind == "string":
            return _string_binary(resolved.oid)
        return _unknown_binary(resolved.oid)

    @overload
    def loaders_for(
        self, columns: Iterable[ColumnType | tuple[int, int] | int], *, binary: Literal[False]
    ) -> tuple[TextLoader, ...]: ...

    @overload
    def loaders_for(
        self, columns: Iterable[ColumnType | tuple[int, int] | int], *, binary: Literal[True]
    ) -> tuple[BinaryLoader, ...]: ...

    def loaders_for(
        self, columns: Iterable[ColumnType | tuple[int, int] | int], *, binary: bool
    ) -> tuple[TextLoader, ...] | tuple[BinaryLoader, ...]:
        """One loader per column (a Relation message's columns, ``(oid, typmod)`` pairs or
        bare OIDs), for the text or the binary format."""
        pairs = [_column(column) for column in columns]
        if binary:
            return tuple(self.binary_loader(oid, typmod) for oid, typmod in pairs)
        return tuple(self.text_loader(oid, typmod) for oid, typmod in pairs)

    def row_loaders(self, columns: Iterable[ColumnType | tuple[int, int] | int]) -> RowLoaders:
        """Both formats' loaders for a relation's columns; build once per Relation message."""
        pairs = [_column(column) for column in columns]
        return RowLoaders(
            tuple(self.text_loader(oid, typmod) for oid, typmod in pairs),
            tuple(self.binary_loader(oid, typmod) for oid, typmod in pairs),
        )
