"""Kafka records → change rows: the Confluent wire format (wire), writer schemas (registry),
the lake's types (lake_types), decoding in Spark (decode) and as Python rows (rows)."""
