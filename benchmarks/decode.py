#!/usr/bin/env python3
"""pgoutput decode throughput: connector.pgoutput vs pypgoutput, on a real PostgreSQL capture;
with --merge-rows, the merge job's decoding of change events into rows instead.

    .venv/bin/python benchmarks/decode.py                 # throwaway PostgreSQL 15
    .venv/bin/python benchmarks/decode.py --dsn "..."     # an existing server (superuser)
    .venv/bin/python benchmarks/decode.py --merge-rows    # no server (needs pyspark installed)

Workload: a table of 11 mixed-type columns; 1000 transactions of 50 inserts, 30 updates and 20
deletes (about 102k messages), captured with pg_logical_slot_peek_binary_changes in protocol 1
(pypgoutput understands nothing newer), text and binary tuples.

Baseline: pypgoutput 0.0.3's `decoders` module (pure Python, BytesIO reads), loaded by file so
that its package's psycopg2/pydantic imports are not needed: `pip install --no-deps
pypgoutput==0.0.3`. Its typed path maps column types to int/datetime/float/json/str and casts
with pydantic; we time those casts done directly (cheaper than pydantic, so a faster baseline).

Rows: "structural" leaves values as sent (text `str`, binary `BinaryValue` bytes; pypgoutput's
are `str` too); "typed" converts every value (ours: connector.pgtypes loaders chosen once per
Relation). Ours runs twice: "native" with the C fast path of connector._native (Insert, Update
and Delete decoded in C; what the product runs when the extension is built) and "pure Python"
with only the Python readers (the fallback: PGCDC_NO_NATIVE=1 or no C compiler). Ratios are
against pypgoutput's row of the same kind, best of --rounds.

--merge-rows: `spark_jobs.events.rows.decode_rows` (the merge job's fast path: Avro bodies ->
flattened rows) over --events change events of benchmarks/merge.py's table (id int8, name text,
qty int4, price numeric(12,2), updated timestamptz, note text), written by the producer's own
codec (tests/support/events.py) in freshness.py's steady mix (10 inserts, 30 updates, 10
deletes per 50 changes), one writer schema: the C decoder (connector/native/avrodec.c) against
fastavro's `schemaless_reader` + `flatten` (the fallback), interleaved rounds, best of --rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from connector.pgoutput import Decoder, Delete, Insert, Relation, Update, decoder  # noqa: E402
from connector.pgtypes import RowLoaders, TypeCatalog  # noqa: E402
from connector.speedups import native  # noqa: E402

# The captures ask for protocol 1 (no streaming): the decoders are told the same.
PROTO = 1
TABLE = """CREATE TABLE bench (
    id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), price float8,
    qty smallint, name text, email varchar(100), active boolean, created timestamptz,
    day date, uid uuid)"""

WORKLOAD = """DO $$
BEGIN
  FOR t IN 0..{txns} - 1 LOOP
    INSERT INTO bench SELECT g, g % 1000, (g * 1.37)::numeric(12,2), g / 7.0, (g % 300)::int2,
        'customer ' || g, 'user' || g || '@example.com', g % 2 = 0,
        '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute',
        '2024-01-01'::date + (g % 365), md5(g::text)::uuid
      FROM generate_series(t * 50, t * 50 + 49) g;
    UPDATE bench SET amount = amount + 1, active = NOT active
      WHERE id BETWEEN t * 50 AND t * 50 + 29;
    DELETE FROM bench WHERE id BETWEEN t * 50 + 30 AND t * 50 + 49;
    COMMIT;
  END LOOP;
END $$"""


def capture(dsn: str, txns: int) -> tuple[list[bytes], list[bytes]]:
    """(text capture, binary capture) of the workload, one bytes object per message."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        try:
            conn.execute(TABLE)
            conn.execute(f"CREATE PUBLICATION {schema} FOR TABLE bench")
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (schema,))
            conn.execute("SET synchronous_commit = on")
            conn.execute(WORKLOAD.format(txns=txns))
            out = []
            for binary in ("false", "true"):
                rows = conn.execute(
                    "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                    "'proto_version', %s, 'publication_names', %s, 'binary', %s)",
                    (schema, str(PROTO), schema, binary)).fetchall()
                out.append([bytes(r[0]) for r in rows])
            return out[0], out[1]
        finally:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s", (schema,))
            conn.execute(f"DROP PUBLICATION IF EXISTS {schema}")
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# --- the decoders under test -------------------------------------------------------------------

def ours_structural(messages: Sequence[bytes]) -> int:
    decode = Decoder(PROTO).decode
    for buf in messages:
        decode(buf)
    return len(messages)


def ours_typed(messages: Sequence[bytes]) -> int:
    """Decode, choose loaders once per Relation, convert every value (text or binary)."""
    decode = Decoder(PROTO).decode
    catalog = TypeCatalog()
    loaders: dict[int, RowLoaders] = {}
    for buf in messages:
        msg = decode(buf)
        cls = type(msg)
        if cls is Insert or cls is Update or cls is Delete:
            row = loaders[msg.relation_id]  # type: ignore[union-attr]
            for values in (msg.new if cls is not Delete else None,  # type: ignore[union-attr]
                           msg.old if cls is not Insert else None):  # type: ignore[union-attr]
                if values is None:
                    continue
                # per value: pgoutput says per column whether it sent text or binary
                [None if v is None else (t(v) if type(v) is str else b(v))
                 for t, b, v in zip(row.text, row.binary, values, strict=True)]
        elif cls is Relation:
            loaders[msg.relation_id] = catalog.row_loaders(  # type: ignore[union-attr]
                [(c.type_oid, c.type_modifier) for c in msg.columns])  # type: ignore[union-attr]
    return len(messages)


@contextmanager
def python_readers() -> Iterator[None]:
    """Only the pure-Python readers in the decoder's dispatch table (as without the extension)."""
    saved = dict(decoder._READERS)
    decoder._READERS.update(decoder.PYTHON_READERS)
    try:
        yield
    finally:
        decoder._READERS.update(saved)


def pure_python(fn: Callable[[Sequence[bytes]], int]) -> Callable[[Sequence[bytes]], int]:
    def run(messages: Sequence[bytes]) -> int:
        with python_readers():
            return fn(messages)
    return run


def check_same(messages: Sequence[bytes]) -> None:
    """The native and pure-Python decoders agree on every captured message (types included)."""
    def shapes(decoded: list[Any]) -> list[Any]:
        return [(type(m), [type(v) for v in getattr(m, "new", None) or ()]) for m in decoded]

    dec = Decoder(PROTO)
    fast = [dec.decode(buf) for buf in messages]
    with python_readers():
        dec = Decoder(PROTO)
        slow = [dec.decode(buf) for buf in messages]
    if fast != slow or shapes(fast) != shapes(slow):
        raise SystemExit("native and pure-Python decoding differ on the capture")


def load_pypgoutput() -> ModuleType | None:
    spec = importlib.util.find_spec("pypgoutput")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "decoders.py"
    mod_spec = importlib.util.spec_from_file_location("pypgoutput_decoders", path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def pypgoutput_runners(mod: ModuleType) -> tuple[Callable[[Sequence[bytes]], int],
                                                 Callable[[Sequence[bytes]], int]]:
    classes = {ord("B"): mod.Begin, ord("C"): mod.Commit, ord("R"): mod.Relation,
               ord("I"): mod.Insert, ord("U"): mod.Update, ord("D"): mod.Delete,
               ord("T"): mod.Truncate}

    def structural(messages: Sequence[bytes]) -> int:
        for buf in messages:
            classes[buf[0]](buf)
        return len(messages)

    # pypgoutput's reader maps type names to these Python types (convert_pg_type_to_py_type).
    casts: dict[int, Callable[[str], Any]] = {
        20: int, 21: int, 23: int, 1700: float, 1184: datetime.fromisoformat,
        1114: datetime.fromisoformat, 114: json.loads, 3802: json.loads}

    def typed(messages: Sequence[bytes]) -> int:
        columns: dict[int, list[Callable[[str], Any]]] = {}
        for buf in messages:
            msg = classes[buf[0]](buf)
            tag = buf[0]
            if tag == 82:  # R
                columns[msg.relation_id] = [casts.get(c.type_id, str) for c in msg.columns]
            elif tag in (73, 85, 68):  # I, U, D
                fns = columns[msg.relation_id]
                for tup in (getattr(msg, "new_tuple", None), getattr(msg, "old_tuple", None)):
                    if tup is not None:
                        [None if c.col_data is None else f(c.col_data)
                         for f, c in zip(fns, tup.column_data, strict=True)]
        return len(messages)

    return structural, typed


# --- timing and report -------------------------------------------------------------------------

def best_times(fns: Sequence[tuple[Callable[[Sequence[bytes]], int], Sequence[bytes]]],
               rounds: int) -> list[float]:
    """Best wall time of each case; rounds interleave the cases so load spikes hit all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, (fn, messages) in enumerate(fns):
            start = time.perf_counter()
            fn(messages)
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def merge_rows(events: int, rounds: int) -> int:
    """--merge-rows: decode_rows through C and through fastavro over the same events."""
    import random
    from decimal import Decimal

    from spark_jobs.events import row_program
    from spark_jobs.events.rows import WriterSchema, decode_rows
    from tests.support.events import LocalRegistry, table_events

    columns = [("id", "int8"), ("name", "text"), ("qty", "int4"), ("price", "numeric(12,2)"),
               ("updated", "timestamptz"), ("note", "text")]  # benchmarks/merge.py's COLUMNS
    registry = LocalRegistry()
    table = table_events(registry, "bench", "public", "t0", columns, ["id"])
    rnd = random.Random(0)
    records: list[tuple[int, bytes]] = []
    for i in range(events):
        key = rnd.randrange(1_000_000)
        kind = i % 50
        if kind >= 40:
            _, value = table.change("d", 1000 + i // 50, kind, before={"id": key})
        else:
            row = {"id": key, "name": f"customer {key}", "qty": rnd.randrange(1000),
                   "price": Decimal(rnd.randrange(10**7)) / 100,
                   "updated": "2026-11-29 03:00:00.123456+00", "note": f"note {i}"}
            _, value = table.change("c" if kind < 10 else "u", 1000 + i // 50, kind, after=row)
        records.append((table.value_id, value[5:]))  # the body: after the 5-byte header
    schema = registry.schemas[table.value_id]
    fast = {table.value_id: WriterSchema.of(schema, False)}
    saved, row_program.native = row_program.native, None
    slow = {table.value_id: WriterSchema.of(schema, False)}
    row_program.native = saved
    if fast[table.value_id].decoder is None:
        print("connector._native is not built (or PGCDC_NATIVE=off): no C decoder to time",
              file=sys.stderr)
        return 2
    if decode_rows(records, fast).rows != decode_rows(records, slow).rows:
        print("the C rows differ from fastavro's", file=sys.stderr)
        return 1
    cases = [("C decoder (connector/native/avrodec.c)", fast),
             ("fastavro schemaless_reader + flatten", slow)]
    # Wall and CPU time (this process's: the decoding is one thread's work, so CPU time is
    # the steadier figure on a loaded machine), best of the interleaved rounds.
    wall, cpu = [float("inf")] * len(cases), [float("inf")] * len(cases)
    for _ in range(rounds):
        for i, (_, writers) in enumerate(cases):
            start, start_cpu = time.perf_counter(), time.process_time()
            decode_rows(records, writers)
            wall[i] = min(wall[i], time.perf_counter() - start)
            cpu[i] = min(cpu[i], time.process_time() - start_cpu)
    size = sum(len(b) for _, b in records)
    print(f"decode_rows: {events:,} events of benchmarks/merge.py's table "
          f"({size / events:.0f} bytes each), best of {rounds}")
    print(f"{'decoder':<40} {'events/s':>10} {'us/event':>9} {'CPU us/event':>13} "
          f"{'vs fastavro (CPU)':>18}")
    for (name, _), seconds, used in zip(cases, wall, cpu, strict=True):
        print(f"{name:<40} {events / seconds:>10,.0f} {seconds / events * 1e6:>9.2f} "
              f"{used / events * 1e6:>13.2f} {cpu[1] / used:>17.1f}x")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}"
          if Path("/proc/loadavg").exists() else "")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="existing server; default: a throwaway PostgreSQL 15")
    parser.add_argument("--transactions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--merge-rows", action="store_true",
                        help="time the merge job's decode_rows, C against fastavro (no server)")
    parser.add_argument("--events", type=int, default=50_000,
                        help="--merge-rows: change events to decode (default: 50,000)")
    args = parser.parse_args(argv)
    if args.merge_rows:
        return merge_rows(args.events, args.rounds)

    pyp = load_pypgoutput()
    if pyp is None:
        print("pypgoutput (the baseline) is not installed: "
              ".venv/bin/pip install --no-deps pypgoutput==0.0.3", file=sys.stderr)
        return 2
    if args.dsn:
        text, binary = capture(args.dsn, args.transactions)
    else:
        from capture_pgoutput import throwaway_server

        with throwaway_server("pg15") as dsn:
            text, binary = capture(dsn, args.transactions)
    pyp_structural, pyp_typed = pypgoutput_runners(pyp)
    check_same(text)
    check_same(binary)

    cases: list[tuple[str, str, Callable[[Sequence[bytes]], int], Sequence[bytes]]] = [
        ("structural", "pypgoutput 0.0.3 (baseline)", pyp_structural, text),
        ("structural", "ours native, text tuples", ours_structural, text),
        ("structural", "ours native, binary tuples", ours_structural, binary),
        ("structural", "ours pure Python, text tuples", pure_python(ours_structural), text),
        ("structural", "ours pure Python, binary tuples", pure_python(ours_structural), binary),
        ("typed", "pypgoutput 0.0.3 + casts (baseline)", pyp_typed, text),
        ("typed", "ours native + pgtypes, text", ours_typed, text),
        ("typed", "ours native + pgtypes, binary", ours_typed, binary),
        ("typed", "ours pure Python + pgtypes, text", pure_python(ours_typed), text),
    ]
    if native is None:
        print("connector._native is not built (or PGCDC_NO_NATIVE is set): "
              "the 'native' rows run the pure-Python readers too", file=sys.stderr)
    print(f"capture: {len(text):,} messages ({sum(map(len, text)) / 1e6:.1f} MB text, "
          f"{sum(map(len, binary)) / 1e6:.1f} MB binary), protocol 1, best of {args.rounds}")
    print(f"{'kind':<11} {'decoder':<38} {'messages/s':>12} {'MB/s':>8} {'vs baseline':>12}")
    baseline: dict[str, float] = {}
    rows: list[str] = []
    times = best_times([(fn, msgs) for _, _, fn, msgs in cases], args.rounds)
    for (kind, name, _, msgs), seconds in zip(cases, times, strict=True):
        rate = len(msgs) / seconds
        baseline.setdefault(kind, rate)
        mb = sum(map(len, msgs)) / 1e6 / seconds
        print(f"{kind:<11} {name:<38} {rate:>12,.0f} {mb:>8.1f} {rate / baseline[kind]:>11.1f}x")
        rows.append(f"| {kind} | {name} | {rate:,.0f} | {mb:.1f} | {rate / baseline[kind]:.1f}x |")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}"
          if Path("/proc/loadavg").exists() else "")
    if args.markdown:
        print("\n| kind | decoder | messages/s | MB/s | vs baseline |")
        print("| --- | --- | ---: | ---: | ---: |")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
