"""Publisher micro-benchmark: `Publisher.publish` of one transaction of 10,000 inserts into a
sink that only records, no Kafka, no registry (ids are fixed), both Avro writers as built.

    .venv/bin/python benchmarks/publish.py [--rows 10000] [--rounds 7]

Prints the best round's events/s (the machines are shared: read the best, compare in one run).
A 6-column table (bigint key, int, text, float8, boolean, numeric), text tuples.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from connector.assembler import Transaction  # noqa: E402
from connector.assembler.transaction import Change, Changes  # noqa: E402
from connector.avro import AvroEncoder, CodecFactory  # noqa: E402
from connector.pgoutput.messages import Insert, Relation, RelationColumn  # noqa: E402
from connector.pgtypes import TypeCatalog, oids  # noqa: E402
from connector.publisher import Publisher  # noqa: E402
from connector.sink import AckTracker  # noqa: E402

RELATION = Relation(None, 16384, "public", "bench", "d", (
    RelationColumn(1, "id", oids.INT8, -1), RelationColumn(0, "qty", oids.INT4, -1),
    RelationColumn(0, "name", oids.TEXT, -1), RelationColumn(0, "score", oids.FLOAT8, -1),
    RelationColumn(0, "active", oids.BOOL, -1),
    RelationColumn(0, "price", oids.NUMERIC, ((12 << 16) | 2) + 4)))


class RecordingSink:
    """Keeps what it is given, as cheaply as a list append (the real sink's cost is Kafka's)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None]] = []
        self.bytes = 0

    def produce(self, topic: str, key: bytes | None, value: bytes | None, ticket: object, *,
                partition: int | None = None) -> None:
        self.records.append((topic, key, value))

    def produce_delete(self, topic: str, key: bytes | None, value: bytes, ticket: object) -> None:
        self.records.append((topic, key, value))

    def produce_truncate(self, topic: str, value: bytes, ticket: object) -> int:
        self.records.append((topic, None, value))
        return 1


class FixedIds:
    """A registry that gives every schema id 1 (the encoder registers its own records)."""

    def register_value(self, subject: str, schema: str) -> int:
        return 1


def transaction(rows: int) -> Transaction:
    changes = [Change(RELATION, Insert(None, RELATION.relation_id,
                                       (str(i), str(i % 100), f"name {i}", "1.5", "t",
                                        "12.34")), 0x1000 + i, i, 700, 0x9000, 0)
               for i in range(rows)]
    return Transaction(700, 0x9000, 0x9100, 0, Changes(changes), 0x1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    codecs = CodecFactory(TypeCatalog(), None, lambda schemas: (1, 2), prefix="bench", db="app")
    encoder = AvroEncoder(FixedIds(), prefix="bench", db="app")
    sink = RecordingSink()
    tracker = AckTracker(None)
    publisher = Publisher(codecs, encoder, sink, tracker)
    txn = transaction(args.rows)
    publisher.publish(txn)  # builds the codec

    def publish() -> None:
        sink.records.clear()
        publisher.publish(txn)

    best = min(timeit.repeat(publish, number=1, repeat=args.rounds))
    print(f"publish of {args.rows} inserts: best {best * 1000:.1f} ms, "
          f"{args.rows / best:,.0f} events/s")


if __name__ == "__main__":
    main()
