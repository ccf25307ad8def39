"""Kafka Connect attributes (``connect.name``, ``connect.type``, ``connect.parameters``,
``connect.default``)
against the real registry: a table's schemas with them register under a subject that holds the
same schemas without them (as registered before they existed) with FULL (BACKWARD and FORWARD)
compatibility, as
a new version, and are served back by id with every attribute kept (Connect's AvroConverter
reads them from the schema it fetches)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connector.avro import SchemaRegistry, derive_table_schemas, key_subject, value_subject
from tests.support.avro import all_types_relation, avro_shape, catalog
from tests.support.kafka import unique

pytestmark = pytest.mark.integration


def _without_connect(schema: Any) -> Any:
    """The schema as registered before, or stricter: no Connect attributes at all (json's
    connect.name, which it had before, is dropped too)."""
    return avro_shape(schema)


def test_connect_attributes_are_a_backward_compatible_new_version(registry: Any) -> None:
    client = SchemaRegistry(registry.url)
    relation = all_types_relation()
    # column defaults too (connect.default): the value's first column and a text one
    texts = [c for c in relation.columns if c.type_oid == 25]
    defaults = {relation.columns[1].name: "1", texts[0].name: "dflt"}
    new = derive_table_schemas(relation, catalog(), prefix=unique("connect"), db="d",
                               defaults=defaults)
    assert '"connect.default":"dflt"' in new.value_json
    assert new.key_schema is not None
    for subject, schema, text in ((value_subject(new.topic), new.value_schema, new.value_json),
                                  (key_subject(new.topic), new.key_schema, new.key_json)):
        old = _without_connect(schema)
        assert old != schema  # the attributes are really there
        assert "connect." not in json.dumps(old)
        old_id = client.register(subject, json.dumps(old))
        client.set_compatibility(subject, "FULL")
        assert client.is_compatible(subject, text), subject
        assert text is not None
        new_id = client.register(subject, text)
        assert new_id != old_id and client.client.get_versions(subject) == [1, 2], subject
        fetched = SchemaRegistry(registry.url).schema(new_id)
        assert fetched == schema  # every connect.* attribute served back as registered
