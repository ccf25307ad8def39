"""TableCodec: one table version's change events -> Kafka keys and Envelope values, in the
Confluent wire format.

    codec = CodecFactory(...).codec(relation)   # codecs.py: once per table version
    key, value = codec.change_from_tuples("c", None, insert.new, SourceInfo(...))
    key = codec.key_from_tuple(insert.new)                        # None: table without key
    value = codec.truncate(SourceInfo(...))
    encode = codec.copy_encoder("r")      # snapshot: one COPY text line -> (key, value)

The writer is chosen once per codec (`TableCodec.writer`): "native", the C row encoder
(connector/avro/native_rows.py) with the C Envelope, when the extension is loaded
(connector/speedups.py, ``PGCDC_NATIVE``) and every column type has a hand encoder; else
"python": per-type hand encoders (`binary`), fastavro ``schemaless_writer`` for a column type
they do not handle, the Envelope around them (`envelope`). Both give the same bytes. The C
writer declines (None, never an exception) a value or line it does not handle; the codec then
writes that event the Python way, which also explains any error -- callers never see a decline
(for COPY lines the C call itself hands a declined line to the Python writer).

Rows are pgoutput TupleData (str / BinaryValue / None / UNCHANGED_TOAST), loaded with the
catalog's loaders chosen once per codec. Per column a converter chosen once (see `typemap`)
turns the loaded value into the Avro datum: Decimal, datetime, date, time, UUID, Interval,
Infinity, OutOfRange, addresses, nested lists...
Dates and timestamps outside 0001-01-01 .. 9999-12-31 (``infinity``, BC, years after 9999)
are clamped to that range (pgtypes' rule, schemas/README.md); numeric(p,s) NaN is null.

Unchanged TOAST: a column PostgreSQL did not send (``UNCHANGED_TOAST``) is null in `after` and
its Avro field name is listed in ``unchanged_toast``; in `before` and the key it is null.
Filling it from a REPLICA IDENTITY FULL old tuple is up to the caller (the assembler/pipeline).

Unparsed: a value its typed column's mapping refuses is null in its row and its exact text is
in the ``unparsed`` map (connector/avro/fallback.py); null there when nothing fell back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal

from fastavro.validation import validate

from connector.errors import SchemaError
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import UNCHANGED_TOAST, TupleData
from connector.pgtypes import TypeCatalog

from .binary import row_encoder, type_encoder
from .envelope import OPS, EnvelopeFrame, SourceInfo, TransactionBlock
from .fallback import exact_text, fallback_datum, report_fallback, unparsed_name
from .fastavro_io import framed_writer, parse_checked
from .masking import masked_loaders
from .native_rows import row_plan
from .schema import ColumnSpec, TableSchemas
from .wire import header

__all__ = ["CopyEncoder", "TableCodec", "Writer"]

#: Which writer a codec uses (see the module docstring).
Writer = Literal["native", "python"]
#: ``encode(line, source, ts_ms, transaction) -> (key, value)``: one COPY text line as an event.
CopyEncoder = Callable[[bytes | bytearray | memoryview, SourceInfo, int | None,
                        TransactionBlock | None], tuple[bytes | None, bytes]]


class TableCodec:
    """Encodes one table's keys and Envelope values for one schema version (see module doc).

    Speed: every union datum is handed to fastavro in its tuple notation ``(branch, datum)``,
    so fastavro does not validate the datum against each branch to pick one (for the
    ``["null", Value]`` of `before`/`after` that would validate the whole row).
    """

    def __init__(self, schemas: TableSchemas, key_id: int | None, value_id: int,
                 catalog: TypeCatalog) -> None:
        if (key_id is None) != (schemas.key_schema is None):
            raise SchemaError(f"{schemas.topic}: key schema id {key_id} does not match "
                              f"{'no' if schemas.key_schema is None else 'a'} key schema")
        self.schemas = schemas
        self.topic = schemas.topic
        self.key_id = key_id
        self.value_id = value_id
        constants = schemas.source_constants
        self._table = f"{constants['schema']}.{constants['table']}"
        columns = schemas.columns
        self._ncols = len(columns)
        self._names = tuple(c.avro_name for c in columns)
        self._branches = tuple(_branch(c.avro_type) for c in columns)
        # where an `unparsed` name sorts: before's columns, then after's (the C encoder's order)
        self._unparsed_order = {unparsed_name(c.avro_name, before): i + (0 if before else
                                                                           len(columns))
                                for before in (True, False) for i, c in enumerate(columns)}
        self._keys = tuple((c.index, c.avro_name) for c in schemas.key_columns)
        parse_checked(schemas.value_schema, schemas.topic)  # the whole Envelope: valid Avro
        value_record = schemas.value_schema["fields"][0]["type"][1]  # before: ["null", Value]
        self._frame = EnvelopeFrame(parse_checked(value_record, schemas.topic),
                                    row_encoder(columns), value_id, schemas.source_constants)
        self._write_key: Callable[[Any], bytes] | None = None
        if schemas.key_schema is not None and key_id is not None:
            parsed_key = parse_checked(schemas.key_schema, schemas.topic + " key")
            encode_key = row_encoder(schemas.key_columns)
            if encode_key is None:
                self._write_key = framed_writer(parsed_key, key_id)
            else:
                key_header = header(key_id)
                self._write_key = lambda datum: key_header + encode_key(datum)
        loaders = catalog.row_loaders(schemas.relation.columns)
        text = [_compose(load, c.convert) for load, c in zip(loaders.text, columns, strict=True)]
        binary = [_compose(load, c.convert)
                  for load, c in zip(loaders.binary, columns, strict=True)]
        for c in columns:  # a masked column's values: its mask, never its type's loaders
            if c.mask is not None:
                text[c.index], binary[c.index] = masked_loaders(c.mask, loaders.binary[c.index])
        self._text: tuple[Callable[[str], Any], ...] = tuple(text)
        self._binary: tuple[Callable[[bytes], Any], ...] = tuple(binary)
        # the C row encoder (connector.avro.native_rows): None, the Python writer
        self._plan: Any = None if self._frame.native is None else row_plan(
            columns, schemas.key_columns, self._text, self._binary,
            [type_encoder(c.avro_type) for c in columns], self._fallback)
        self.writer: Final[Writer] = "python" if self._plan is None else "native"
        self._key_header = b"" if key_id is None else header(key_id)

    @property
    def has_native_rows(self) -> bool:
        """Whether the C writer serves this codec: COPY text lines are then best handed to
        `copy_encoder` as the server sent them (no Python parsing)."""
        return self.writer == "native"

    # ------------------------------------------------------------------ rows

    def _row_from_tuple(self, data: TupleData, toast: list[str] | None,
                        unparsed: dict[str, str], before: bool) -> dict[str, Any]:
        """pgoutput TupleData -> {field: None | (branch, datum)}; the exact text of a value that
        falls back to null goes to `unparsed` (`before`: the row is the Envelope's `before`)."""
        if len(data) != self._ncols:
            raise SchemaError(f"{self.topic}: tuple of {len(data)} columns for "
                              f"{self._ncols} columns")
        row: dict[str, Any] = {}
        text, binary, branches = self._text, self._binary, self._branches
        for i, (name, raw) in enumerate(zip(self._names, data, strict=True)):
            if raw is None:
                row[name] = None
                continue
            if raw is UNCHANGED_TOAST:
                row[name] = None
                if toast is not None:
                    toast.append(name)
                continue
            try:
                datum = text[i](raw) if isinstance(raw, str) else binary[i](raw)  # type: ignore[arg-type]
            except Exception as exc:  # DecodeError, a converter's ValueError...: the fallback
                datum = self._fallback(i, raw, exc)
                if datum is None:
                    unparsed[unparsed_name(name, before)] = exact_text(raw)
            row[name] = None if datum is None else (branches[i], datum)
        return row

    def _fallback(self, i: int, raw: Any, exc: BaseException) -> Any:
        """The datum of column `i` for a value its mapping refused (connector/avro/fallback.py)."""
        column = self.schemas.columns[i]
        report_fallback(self._table, column.pg_name, column.avro_type, raw, exc)
        return fallback_datum(column.avro_type, raw)

    # ------------------------------------------------------------------ keys

    def key_from_tuple(self, data: TupleData) -> bytes | None:
        """The framed key of a pgoutput tuple (new row, or the old key/row)."""
        if self._write_key is None:
            return None
        if self._plan is not None:  # the C writer; None: it declines, the Python one writes
            fields: bytes | None
            try:
                fields = self._plan.key(data)
            except ValueError:
                # What it can raise: its Python pieces (native_rows._piece) catch every error
                # of loading and encoding a value and apply the fallback rule, whose datum is a
                # text (plain string column) or null; left is a text that is not valid UTF-8
                # (a lone surrogate: UnicodeEncodeError). The Python path below explains it.
                fields = None
            if fields is not None:
                return self._key_header + fields
        if len(data) != self._ncols:
            raise SchemaError(f"{self.topic}: tuple of {len(data)} columns for "
                              f"{self._ncols} columns")
        row: dict[str, Any] = {}
        for index, name in self._keys:  # load the key columns only
            raw = data[index]
            if raw is None or raw is UNCHANGED_TOAST:
                row[name] = None
            else:
                try:
                    datum = (self._text[index](raw) if isinstance(raw, str)
                             else self._binary[index](raw))  # type: ignore[arg-type]
                except Exception as exc:
                    datum = self._fallback(index, raw, exc)
                row[name] = None if datum is None else (self._branches[index], datum)
        return self._encode_key(row)

    def _key_of(self, row: Mapping[str, Any]) -> bytes | None:
        if self._write_key is None:
            return None
        return self._encode_key({name: row[name] for _, name in self._keys})

    def _encode_key(self, datum: dict[str, Any]) -> bytes:
        assert self._write_key is not None
        try:
            return self._write_key(datum)
        except Exception as exc:
            if self._repair(exc, [datum], self.schemas.key_columns):
                return self._encode_key(datum)
            raise self._explain(exc, datum, self.schemas.key_columns, "key") from None

    def _repair(self, exc: Exception, rows: Sequence[dict[str, Any] | None],
                columns: Sequence[ColumnSpec], unparsed: dict[str, str] | None = None,
                raws: Sequence[TupleData | None] = ()) -> bool:
        """After an encoding failure: replace each datum that does not fit its column's Avro
        type by the fallback (connector/avro/fallback.py). Whether anything was replaced.

        `rows`: the Envelope's (before, after), or the key alone; `raws`: the tuples they were
        loaded from (the exact texts; without them a datum's str()); `unparsed`: the Envelope's
        map, kept in the C row encoder's order (before's columns, then after's)."""
        repaired = False
        for r, row in enumerate(rows):
            if row is None:
                continue
            tuple_data = raws[r] if r < len(raws) else None
            for column in columns:
                field = row.get(column.avro_name)
                datum = field[1] if isinstance(field, tuple) else field
                if validate(datum, ["null", column.avro_type], raise_errors=False):
                    continue
                raw = (tuple_data[column.index] if tuple_data is not None
                       else datum if isinstance(datum, str | bytes) else str(datum))
                report_fallback(self._table, column.pg_name, column.avro_type, raw, exc)
                text = fallback_datum(column.avro_type, raw)
                row[column.avro_name] = None if text is None else (
                    self._branches[column.index], text)
                if text is None and unparsed is not None:
                    unparsed[unparsed_name(column.avro_name, r == 0)] = exact_text(raw)
                repaired = True
        if repaired and unparsed:
            order = self._unparsed_order
            ordered = sorted(unparsed.items(), key=lambda item: order[item[0]])
            unparsed.clear()
            unparsed.update(ordered)
        return repaired

    # ------------------------------------------------------------------ values

    def value_from_tuples(self, op: str, old: TupleData | None, new: TupleData | None,
                          source: SourceInfo, *, ts_ms: int | None = None,
                          transaction: TransactionBlock | None = None) -> bytes:
        """The framed Envelope of a change, from pgoutput tuples (old: 'K'/'O' tuple)."""
        return self.change_from_tuples(op, old, new, source, ts_ms=ts_ms,
                                       transaction=transaction, with_key=False)[1]

    def change_from_tuples(self, op: str, old: TupleData | None, new: TupleData | None,
                           source: SourceInfo, *, ts_ms: int | None = None,
                           transaction: TransactionBlock | None = None,
                           with_key: bool = True) -> tuple[bytes | None, bytes]:
        """(key, value) of a change from pgoutput tuples, loading each tuple once.

        The key comes from `new` when there is one (insert, update), else from `old`."""
        if self._plan is not None and op in OPS:  # the C writer; None: it declines
            fast: tuple[bytes | None, bytes] | None = self._plan.change(
                self._frame.native, self._key_header, op, old, new, source, ts_ms,
                transaction, with_key)
            if fast is not None:
                return fast
        toast: list[str] = []
        unparsed: dict[str, str] = {}
        before = None if old is None else self._row_from_tuple(old, None, unparsed, True)
        after = None if new is None else self._row_from_tuple(new, toast, unparsed, False)
        key = None
        if with_key:
            keyed = after if after is not None else before
            key = None if keyed is None else self._key_of(keyed)
        return key, self._envelope(op, before, after, toast, source, ts_ms, transaction,
                                   unparsed, (old, new))

    def change_from_copy(self, op: str, line: bytes | bytearray | memoryview, source: SourceInfo, *,
                         ts_ms: int | None = None,
                         transaction: TransactionBlock | None = None,
                         ) -> tuple[bytes | None, bytes]:
        """(key, value) of a row given as one line of ``COPY ... TO STDOUT`` text output (for
        many lines, `copy_encoder`)."""
        return self.copy_encoder(op)(line, source, ts_ms, transaction)

    def copy_encoder(self, op: str) -> CopyEncoder:
        """`change_from_copy` bound to `op`, for a loop over many lines:
        ``encode(line, source, ts_ms, transaction) -> (key, value)``. With the C writer it is
        one C call per line (no Python frame), which hands a line it declines to the Python
        writer; with the Python writer each line is parsed (`parse_copy_text`) and goes to
        `change_from_tuples`, which explains any error."""
        # imported here: connector.snapshot imports this package
        from connector.snapshot.copytext import parse_copy_text

        change = self.change_from_tuples

        def encode_python(line: bytes | bytearray | memoryview, source: SourceInfo,
                          ts_ms: int | None, transaction: TransactionBlock | None,
                          ) -> tuple[bytes | None, bytes]:
            return change(op, None, parse_copy_text(line), source, ts_ms=ts_ms,
                          transaction=transaction)

        if self._plan is None or op not in OPS:
            return encode_python
        return partial(self._plan.copy_change, self._frame.native, self._key_header, op,
                       encode_python)

    def truncate(self, source: SourceInfo, *, ts_ms: int | None = None,
                 transaction: TransactionBlock | None = None) -> bytes:
        """The framed Envelope of a truncate (op ``t``; publish it to every partition)."""
        return self._envelope("t", None, None, [], source, ts_ms, transaction)

    def _envelope(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                  toast: list[str], source: SourceInfo, ts_ms: int | None,
                  transaction: TransactionBlock | None, unparsed: dict[str, str] | None = None,
                  raws: Sequence[TupleData | None] = ()) -> bytes:
        if op not in OPS:
            raise SchemaError(f"{self.topic}: unknown op {op!r} (expected one of c u d r t)")
        try:
            return self._frame.write(op, before, after, toast, source, ts_ms, transaction,
                                     unparsed)
        except Exception as exc:
            if unparsed is None:
                unparsed = {}
            if self._repair(exc, (before, after), self.schemas.columns, unparsed, raws):
                return self._envelope(op, before, after, toast, source, ts_ms, transaction,
                                      unparsed, raws)
            for row in (after, before):
                if row is not None:
                    raise self._explain(exc, row, self.schemas.columns, op, source) from None
            raise SchemaError(f"{self.topic}: cannot encode {op} event at commit LSN "
                              f"{lsn_to_str(source.commit_lsn)}: {exc}") from None

    def _explain(self, exc: Exception, row: Mapping[str, Any], columns: Sequence[ColumnSpec],
                 what: str, source: SourceInfo | None = None) -> SchemaError:
        """Which column's datum does not fit its Avro type (only on the failure path)."""
        where = "" if source is None else f" at commit LSN {lsn_to_str(source.commit_lsn)}"
        constants = self.schemas.source_constants
        table = f"{constants['schema']}.{constants['table']}"
        for column in columns:
            datum = row.get(column.avro_name)
            if isinstance(datum, tuple):
                datum = datum[1]
            if not validate(datum, ["null", column.avro_type], raise_errors=False):
                shown = repr(datum)
                shown = shown[:80] + "..." if len(shown) > 80 else shown
                return SchemaError(f"cannot encode {what} event of {table}{where}: column "
                                   f"{column.pg_name!r} value {shown} does not fit Avro type "
                                   f"{column.avro_type} ({type(exc).__name__}: {exc})")
        return SchemaError(f"cannot encode {what} event of {table}{where}: "
                           f"{type(exc).__name__}: {exc}")


def _branch(avro_type: Any) -> str:
    """The name fastavro's tuple notation uses for a union branch of this type."""
    if isinstance(avro_type, str):
        return avro_type
    kind = avro_type["type"]
    if kind in ("record", "enum", "fixed"):
        namespace = avro_type.get("namespace")
        return f"{namespace}.{avro_type['name']}" if namespace else str(avro_type["name"])
    return str(kind)


def _compose(load: Callable[[Any], Any], convert: Callable[[Any], Any] | None
             ) -> Callable[[Any], Any]:
    if convert is None:
        return load

    def load_convert(raw: Any) -> Any:
        value = load(raw)
        return None if value is None else convert(value)

    return load_convert


