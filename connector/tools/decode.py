"""`pgcdc decode FILE`: print pgoutput captures as JSON, one object per message.

FILE (or `-` for stdin) holds JSON lines `{"lsn": "0/16B3748", "xid": 740, "data": "42000..."}`,
i.e. rows of `pg_logical_slot_peek_binary_changes(...)` with `data` as hex (a leading `\\x`, as
PostgreSQL prints bytea, is accepted). Lines must be in capture order: Stream Start/Stop blocks
decide whether a change carries an xid, and `--typed` needs the Relation messages.

A first line `{"options": {"proto_version": "4", "streaming": "parallel", ...}}` (what
scripts/capture_pgoutput.py writes) records the options the capture was taken with: with
``streaming 'parallel'`` a Stream Abort carries the abort LSN and time, which its bytes alone do
not tell. `--proto-version` and `--streaming` give them for a capture without that line (or
override it); by default a capture is protocol 4 without parallel streaming.

Output: `{"type": "insert", ...}` with the spec's fields in snake_case, LSNs as "X/Y", timestamps
as ISO-8601 UTC, tuples as lists in column order (text exactly as sent, null for NULL,
{"unchanged_toast": true} for 'u', {"binary": "<hex>"} for 'b').

Corrupt input stops at the first bad line with one line on stderr naming the line, the byte
offset inside the message and the problem; exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, NamedTuple

from connector.errors import DecodeError
from connector.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    BinaryValue,
    Commit,
    CommitPrepared,
    Decoder,
    Delete,
    Insert,
    Message,
    Origin,
    PgOutputMessage,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Type,
    Update,
    lsn_to_str,
    pg_timestamp_to_datetime,
    str_to_lsn,
)

from .typed import TypedValues

TYPE_NAMES: dict[type, str] = {
    Begin: "begin", Commit: "commit", Origin: "origin", Relation: "relation", Type: "type",
    Insert: "insert", Update: "update", Delete: "delete", Truncate: "truncate",
    Message: "message", StreamStart: "stream_start", StreamStop: "stream_stop",
    StreamCommit: "stream_commit", StreamAbort: "stream_abort", BeginPrepare: "begin_prepare",
    Prepare: "prepare", CommitPrepared: "commit_prepared", RollbackPrepared: "rollback_prepared",
    StreamPrepare: "stream_prepare",
}

TupleRenderer = Callable[[int, TupleData], list[Any]]


class CaptureError(DecodeError):
    """A bad capture line: which file and line, and the DecodeError's reason/offset/lsn."""

    def __init__(self, source: str, line: int, reason: str, *, offset: int | None = None,
                 lsn: int | None = None) -> None:
        super().__init__(f"{source} line {line}: {reason}", offset=offset,
                         lsn=None if lsn is None else lsn_to_str(lsn))
        self.source = source
        self.line = line
        self.detail = reason

    def describe(self) -> str:
        """One line: `FILE line N (lsn X/Y), byte offset K: what was wrong`."""
        where = f"{self.source} line {self.line}"
        if self.lsn is not None:
            where += f" (lsn {self.lsn})"
        if self.offset is not None:
            where += f", byte offset {self.offset}"
        return f"{where}: {self.detail}"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "decode", help="print a pgoutput capture (JSON lines of lsn/xid/data) as JSON",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="capture file, or - for stdin")
    parser.add_argument("--typed", action="store_true",
                        help="convert column values to typed JSON values using the column "
                             "types of the capture's Relation messages")
    parser.add_argument("--proto-version", type=int, choices=range(1, 5), metavar="{1,2,3,4}",
                        help="the capture's proto_version (default: its options line, else 4)")
    parser.add_argument("--streaming", choices=["off", "on", "parallel"],
                        help="the capture's streaming option (default: its options line, "
                             "else on)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    if hasattr(out, "reconfigure"):
        out.reconfigure(encoding="utf-8")
    name = "<stdin>" if args.file == "-" else args.file
    given = StreamSettings(args.proto_version, args.streaming)
    try:
        if args.file == "-":
            _write(decode_lines(sys.stdin, name, typed=args.typed, settings=given), out)
        else:
            try:
                fh = open(args.file, encoding="utf-8")  # noqa: SIM115 - closed below
            except OSError as exc:
                print(f"pgcdc decode: cannot read {name}: {exc.strerror}", file=sys.stderr)
                return 1
            with fh:
                _write(decode_lines(fh, name, typed=args.typed, settings=given), out)
    except CaptureError as exc:
        print(f"pgcdc decode: {exc.describe()}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `pgcdc decode f | head`: the reader left, not an error
        sys.stderr.close()
    return 0


def _write(objects: Iterable[dict[str, Any]], out: IO[str]) -> None:
    for obj in objects:
        out.write(json.dumps(obj, ensure_ascii=False, allow_nan=False))
        out.write("\n")
    out.flush()


class StreamSettings(NamedTuple):
    """What a capture was taken with, as far as decoding depends on it (None: not given)."""

    proto_version: int | None = None
    streaming: str | None = None  # PostgreSQL's value: off/on/true/false/parallel

    def over(self, other: StreamSettings) -> StreamSettings:
        """These settings, completed by `other` where not given."""
        return StreamSettings(
            other.proto_version if self.proto_version is None else self.proto_version,
            other.streaming if self.streaming is None else self.streaming)

    def decoder(self) -> Decoder:
        """Raises ValueError for settings no server accepts (parallel below protocol 4)."""
        parallel = (self.streaming or "").lower() == "parallel"
        return Decoder(4 if self.proto_version is None else self.proto_version,
                       parallel_streaming=parallel)


def decode_lines(lines: Iterable[str], name: str = "<input>", *, typed: bool = False,
                 settings: StreamSettings | None = None) -> Iterator[dict[str, Any]]:
    """Decode capture lines lazily; CaptureError names `name`, the line number and the offset.

    `settings` (given by the user) take precedence over the capture's options line."""
    decoder: Decoder | None = None
    typed_values = TypedValues() if typed else None
    render_tuple: TupleRenderer = (
        typed_values.render if typed_values is not None else _render_raw_tuple)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if decoder is None:
            header = _parse_options(line, name, number)
            try:
                given = settings or StreamSettings()
                decoder = given.over(header or StreamSettings()).decoder()
            except ValueError as exc:
                raise CaptureError(name, number, str(exc)) from None
            if header is not None:
                continue
        data, lsn = _parse_record(line, name, number)
        try:
            msg = decoder.decode(data)
            if typed_values is not None:
                typed_values.observe(msg)
            yield message_to_json(msg, render_tuple)
        except DecodeError as exc:
            raise CaptureError(name, number, exc.reason, offset=exc.offset, lsn=lsn) from None


def _parse_options(line: str, source: str, number: int) -> StreamSettings | None:
    """The settings of a capture's options line, or None when `line` is a record."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None  # reported as the record it is meant to be
    if not isinstance(record, dict) or "options" not in record or "data" in record:
        return None
    options = record["options"]
    if not isinstance(options, dict):
        raise CaptureError(source, number, '"options" must be an object of pgoutput options')
    proto = options.get("proto_version")
    try:
        proto_version = None if proto is None else int(proto)
    except (TypeError, ValueError):
        raise CaptureError(source, number, f"proto_version {proto!r} is not a number") from None
    streaming = options.get("streaming")
    return StreamSettings(proto_version, None if streaming is None else str(streaming))


def _parse_record(line: str, source: str, number: int) -> tuple[bytes, int | None]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CaptureError(source, number,
                           f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise CaptureError(source, number, "expected a JSON object with lsn, xid and data")
    lsn: int | None = None
    raw_lsn = record.get("lsn")
    if raw_lsn is not None:
        try:
            lsn = str_to_lsn(str(raw_lsn))
        except ValueError as exc:
            raise CaptureError(source, number, str(exc)) from None
    hex_data = record.get("data")
    if not isinstance(hex_data, str):
        raise CaptureError(source, number, 'missing "data" (hex of one pgoutput message)',
                           lsn=lsn)
    if hex_data.startswith("\\x"):
        hex_data = hex_data[2:]
    try:
        return bytes.fromhex(hex_data), lsn
    except ValueError as exc:
        raise CaptureError(source, number, f'"data" is not hex ({exc})', lsn=lsn) from None


# --- rendering ---------------------------------------------------------------------------------

def _render_value(value: object) -> Any:
    if value is None or type(value) is str:
        return value
    if value is UNCHANGED_TOAST:
        return {"unchanged_toast": True}
    if isinstance(value, BinaryValue):
        return {"binary": value.hex()}
    raise TypeError(f"not a TupleData value: {value!r}")  # pragma: no cover - decoder invariant


def _render_raw_tuple(relation_id: int, values: TupleData) -> list[Any]:
    return [_render_value(v) for v in values]


def _timestamp(micros: int | None) -> str | int | None:
    if micros is None:
        return None
    try:
        return pg_timestamp_to_datetime(micros).isoformat()
    except OverflowError:  # beyond datetime's years 1-9999: show the raw microseconds
        return micros


def message_to_json(msg: PgOutputMessage, render_tuple: TupleRenderer = _render_raw_tuple
                    ) -> dict[str, Any]:
    """One message as a JSON-ready dict: {"type": ..., fields in spec order}."""
    out: dict[str, Any] = {"type": TYPE_NAMES[type(msg)]}
    relation_id = getattr(msg, "relation_id", 0)
    values: tuple[Any, ...] = msg  # heterogeneous fields: dispatch on the name below
    for field, value in zip(msg._fields, values, strict=True):
        if field == "lsn" or field.endswith("_lsn"):
            out[field] = None if value is None else lsn_to_str(value)
        elif field.endswith("_timestamp"):
            out[field] = _timestamp(value)
        elif field in ("new", "old"):
            out[field] = None if value is None else render_tuple(relation_id, value)
        elif field == "columns":
            out[field] = [{"name": c.name, "type_oid": c.type_oid,
                           "type_modifier": c.type_modifier, "key": c.key, "flags": c.flags}
                          for c in value]
        elif field == "content":
            out[field] = value.hex()
            try:
                out["content_text"] = value.decode()
            except UnicodeDecodeError:
                out["content_text"] = None
        elif field == "relation_ids":
            out[field] = list(value)
        else:
            out[field] = value
    if isinstance(msg, Message):
        out["transactional"] = msg.transactional
    elif isinstance(msg, Truncate):
        out["cascade"] = msg.cascade
        out["restart_identity"] = msg.restart_identity
    return out
