# Types of the C extension connector._native (sources: connector/native/*.c).
from collections.abc import Callable
from typing import Any

from connector.avro.envelope import SourceInfo, TransactionBlock
from connector.pgoutput.messages import Delete, Insert, Update

# tuple.c: pgoutput Insert/Update/Delete decoding
def setup(insert: type, update: type, delete: type, binary_value: type, unchanged: object,
          insert_reader: Callable[..., Any], update_reader: Callable[..., Any],
          delete_reader: Callable[..., Any]) -> None: ...
def decode_change(buf: bytes, streaming: bool) -> Insert | Update | Delete | None: ...
def read_change(buf: bytes, streaming: bool) -> Insert | Update | Delete: ...

# rowenc.c: pgoutput text values / COPY text lines -> Avro row fields
ROW_KINDS: dict[str, int]  # its parsers by name (connector/avro/native_rows.py plans with them)
class RowPlan:
    def __init__(self, kinds: bytes, scales: tuple[int, ...], int_digits: tuple[int, ...],
                 fallbacks: tuple[Callable[[Any], bytes | tuple[bytes, str]], ...],
                 names: tuple[str, ...],
                 keys: tuple[int, ...], unchanged: object) -> None: ...
    def encode(self, values: tuple[Any, ...], toast: list[str] | None = None,
               with_key: bool = False, unparsed: dict[str, str] | None = None,
               before: bool = False) -> tuple[bytes, bytes | None] | None: ...
    def encode_copy(self, line: bytes | bytearray | memoryview, with_key: bool = False,
                    unparsed: dict[str, str] | None = None
                    ) -> tuple[bytes, bytes | None] | None: ...
    def key(self, values: tuple[Any, ...]) -> bytes | None: ...
    def copy_change(self, frame: EnvelopeFrame, key_header: bytes, op: str,
                    declined: Callable[..., tuple[bytes | None, bytes]] | None,
                    line: bytes | bytearray | memoryview, source: SourceInfo,
                    ts_ms: int | None,
                    transaction: TransactionBlock | None) -> tuple[bytes | None, bytes] | None: ...
    def change(self, frame: EnvelopeFrame, key_header: bytes, op: str,
               old: tuple[Any, ...] | None, new: tuple[Any, ...] | None, source: SourceInfo,
               ts_ms: int | None, transaction: TransactionBlock | None,
               with_key: bool) -> tuple[bytes | None, bytes] | None: ...

# envelope.c: the Envelope around encoded rows
SOURCE_FIELDS: tuple[str, ...]  # the SourceInfo positions it reads, in order
class EnvelopeFrame:
    def __init__(self, header: bytes, source_head: bytes, db: bytes,
                 schema_table: bytes) -> None: ...
    def write(self, op: str, before: bytes | None, after: bytes | None, toast: list[str],
              source: SourceInfo, ts_ms: int | None,
              transaction: TransactionBlock | None,
              unparsed: dict[str, str] | None = None) -> bytes | None: ...

# avrodec.c: change events (Avro Envelopes) -> the merge job's flattened rows
class RowDecoder:
    def __init__(self, program: tuple[Any, ...], roles: tuple[int, ...],
                 source_roles: tuple[int, ...], slots: tuple[int, ...],
                 columns: tuple[str, ...], keys: tuple[str, str, str, str, str],
                 toast_names: dict[str, str] | None, decimal_type: Callable[[str], Any],
                 decimal_of: Callable[[bytes, int, int], Any]) -> None: ...
def decode_envelopes(records: list[tuple[int, bytes]], decoders: dict[int, RowDecoder | None]
                     ) -> tuple[list[dict[str, Any]], int, int, set[str]] | None: ...
