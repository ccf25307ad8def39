"""pgcdc: PostgreSQL logical replication (pgoutput) to Kafka as Avro, merged into Delta Lake."""

__version__ = "0.1.0"
