#!/usr/bin/env python3
"""Type loader throughput: connector.pgtypes vs psycopg 3's own loaders, per type and per row.

    .venv/bin/python benchmarks/types.py [--values 20000] [--rounds 5]

Input: the 11 column types of benchmarks/decode.py's table (int8, int4, numeric(12,2), float8,
int2, text, varchar, bool, timestamptz, date, uuid) plus jsonb, interval and int4[], as
PostgreSQL prints them (text format, ``str``) and sends them (binary format, ``bytes``);
synthesised here in the exact forms the integration tests check against real servers.

Baseline: psycopg 3.3's loaders for the same OIDs (``Transformer().get_loader``), which are
C (psycopg_binary) where psycopg has them. They are given the bytes they expect (text values
pre-encoded), so their rows carry no decode step ours has. Ratios are ours / psycopg
(> 1: ours is faster), best of --rounds, cases interleaved within each round.
"""

from __future__ import annotations

import argparse
import datetime as dt
import struct
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from psycopg import pq
from psycopg.adapt import Transformer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from connector.pgtypes import TypeCatalog, oids  # noqa: E402

TEXT, BINARY = pq.Format.TEXT, pq.Format.BINARY
PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _numeric_send(value: Decimal) -> bytes:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0") or "0"
    shift = exponent % 4
    text += "0" * shift
    text = "0" * (-len(text) % 4) + text
    groups = [int(text[i : i + 4]) for i in range(0, len(text), 4)]
    weight = len(groups) - 1 + (exponent - shift) // 4
    while groups and groups[-1] == 0:
        groups.pop()
    return struct.pack(f">hhHH{len(groups)}H", len(groups), weight, 0x4000 * sign,
                       max(-exponent, 0), *groups)  # fmt: skip


def _array_send(values: Sequence[int]) -> bytes:
    head = struct.pack(">iiIii", 1, 0, oids.INT4, len(values), 1)
    return head + b"".join(struct.pack(">ii", 4, v) for v in values)


def make_values(n: int) -> dict[str, tuple[int, list[str], list[bytes]]]:
    """name -> (oid, text values, binary values)."""
    cases: dict[str, tuple[int, list[str], list[bytes]]] = {}

    def add(name: str, oid: int, text: list[str], binary: list[bytes]) -> None:
        cases[name] = (oid, text, binary)

    g = range(n)
    add("int8", oids.INT8, [str(i * 7919) for i in g], [struct.pack(">q", i * 7919) for i in g])
    add("int4", oids.INT4, [str(i % 1000) for i in g], [struct.pack(">i", i % 1000) for i in g])
    add("int2", oids.INT2, [str(i % 300) for i in g], [struct.pack(">h", i % 300) for i in g])
    amounts = [Decimal(i * 137).scaleb(-2) for i in g]
    add("numeric(12,2)", oids.NUMERIC, [str(a) for a in amounts],
        [_numeric_send(a) for a in amounts])  # fmt: skip
    prices = [i / 7.0 for i in g]
    add("float8", oids.FLOAT8, [repr(p) for p in prices], [struct.pack(">d", p) for p in prices])
    names = [f"customer {i}" for i in g]
    add("text", oids.TEXT, names, [s.encode() for s in names])
    emails = [f"user{i}@example.com" for i in g]
    add("varchar", oids.VARCHAR, emails, [s.encode() for s in emails])
    add("bool", oids.BOOL, ["t" if i % 2 else "f" for i in g],
        [b"\x01" if i % 2 else b"\x00" for i in g])  # fmt: skip
    stamps = [
        dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i, microseconds=i) for i in g
    ]
    micros = [(s - PG_EPOCH) // dt.timedelta(microseconds=1) for s in stamps]
    texts = [s.isoformat(" ").replace("+00:00", "+00") for s in stamps]
    add("timestamptz", oids.TIMESTAMPTZ, texts, [struct.pack(">q", m) for m in micros])
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i % 365) for i in g]
    add("date", oids.DATE, [d.isoformat() for d in days],
        [struct.pack(">i", d.toordinal() - 730120) for d in days])  # fmt: skip
    uids = [uuid.UUID(int=i * 0x9E3779B97F4A7C15) for i in g]
    add("uuid", oids.UUID, [str(u) for u in uids], [u.bytes for u in uids])
    docs = [f'{{"id": {i}, "tags": ["a", "b"]}}' for i in g]
    add("jsonb", oids.JSONB, docs, [b"\x01" + d.encode() for d in docs])
    add("interval", oids.INTERVAL, [f"{i % 12} mons {i % 30} days 0{i % 10}:00:01.5" for i in g],
        [struct.pack(">qii", (i % 10) * 3600_000_000 + 1500_000, i % 30, i % 12)
         for i in g])  # fmt: skip
    arrays = [[i, i + 1, i + 2] for i in g]
    add("int4[]", 1007, ["{" + ",".join(map(str, a)) + "}" for a in arrays],
        [_array_send(a) for a in arrays])  # fmt: skip
    return cases


def _timed(load: Callable[[Any], Any], values: list[Any]) -> float:
    start = time.perf_counter()
    for value in values:
        load(value)
    return time.perf_counter() - start


def _timed_rows(loaders: Sequence[Callable[[Any], Any]], rows: list[tuple[Any, ...]]) -> float:
    start = time.perf_counter()
    for row in rows:
        [load(value) for load, value in zip(loaders, row)]  # noqa: B905
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    cases = make_values(args.values)
    catalog = TypeCatalog()
    transformer = Transformer()
    best: dict[tuple[str, str, str], float] = {}

    def record(key: tuple[str, str, str], seconds: float) -> None:
        best[key] = min(best.get(key, float("inf")), seconds)

    row_types = ["int8", "int4", "numeric(12,2)", "float8", "int2", "text", "varchar", "bool",
                 "timestamptz", "date", "uuid"]  # fmt: skip
    text_rows = list(zip(*(cases[name][1] for name in row_types), strict=True))
    text_rows_bytes = [tuple(v.encode() for v in row) for row in text_rows]
    binary_rows = list(zip(*(cases[name][2] for name in row_types), strict=True))
    row_oids = [cases[name][0] for name in row_types]

    for _ in range(args.rounds):
        for name, (oid, text, binary) in cases.items():
            text_bytes = [t.encode() for t in text]
            psy_text = transformer.get_loader(oid, TEXT).load
            psy_binary = transformer.get_loader(oid, BINARY).load
            record((name, "text", "pgtypes"), _timed(catalog.text_loader(oid), text))
            record((name, "text", "psycopg"), _timed(psy_text, text_bytes))
            record((name, "binary", "pgtypes"), _timed(catalog.binary_loader(oid), binary))
            record((name, "binary", "psycopg"), _timed(psy_binary, binary))
        ours = catalog.row_loaders(row_oids)
        psy = [(transformer.get_loader(o, TEXT).load, transformer.get_loader(o, BINARY).load)
               for o in row_oids]  # fmt: skip
        record(("row of 11", "text", "pgtypes"), _timed_rows(ours.text, text_rows))
        record(("row of 11", "text", "psycopg"), _timed_rows([p[0] for p in psy], text_rows_bytes))
        record(("row of 11", "binary", "pgtypes"), _timed_rows(ours.binary, binary_rows))
        record(("row of 11", "binary", "psycopg"), _timed_rows([p[1] for p in psy], binary_rows))

    n = args.values
    print(f"{n} values per type, best of {args.rounds} rounds; psycopg {pq.version()} "
          f"({pq.__impl__} implementation) is the baseline\n")  # fmt: skip
    print("| type | format | pgtypes values/s | psycopg values/s | pgtypes / psycopg |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name in [*cases, "row of 11"]:
        unit = " rows/s" if name == "row of 11" else ""
        for fmt in ("text", "binary"):
            ours_s = best[(name, fmt, "pgtypes")]
            psy_s = best[(name, fmt, "psycopg")]
            print(f"| {name} | {fmt} | {n / ours_s:,.0f}{unit} | {n / psy_s:,.0f}{unit} | "
                  f"{psy_s / ours_s:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
