"""Pure parts of the registry module: subjects, canonical text, URL redaction, the quirks."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connector.avro.registry import (
    SchemaRegistry,
    canonical_json,
    key_subject,
    missing_subject_is_compatible_quirk,
    redact_url,
    strip_exception_class_quirk,
    value_subject,
)
from connector.errors import SchemaError


def test_topic_name_strategy() -> None:
    assert key_subject("shop.public.orders") == "shop.public.orders-key"
    assert value_subject("shop.public.orders") == "shop.public.orders-value"


def test_canonical_json_is_compact_and_ordered() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "é", "type": "int"}]}
    expected = '{"type":"record","name":"R","fields":[{"name":"é","type":"int"}]}'
    assert canonical_json(schema) == expected
    assert canonical_json('{"type": "string"}') == '{"type": "string"}'


@pytest.mark.parametrize(("url", "shown"), [
    ("http://reg:8081", "http://reg:8081"),
    ("https://user:s3cret@reg.example.com:8443/apis/ccompat/v7",
     "https://reg.example.com:8443/apis/ccompat/v7"),
    ("http://user@reg/", "http://reg/"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)


@pytest.mark.parametrize(("message", "clean"), [
    ("io.apicurio.registry.rules.RuleViolationException: Incompatible artifact: x",
     "Incompatible artifact: x"),
    ("io.apicurio.registry.storage.error.VersionNotFoundException: No version",
     "No version"),
    ("Schema being registered is incompatible with an earlier schema for subject \"t-value\"",
     "Schema being registered is incompatible with an earlier schema for subject \"t-value\""),
    ("Invalid schema: Exception: x", "Invalid schema: Exception: x"),
])
def test_strip_exception_class_quirk(message: str, clean: str) -> None:
    assert strip_exception_class_quirk(message) == clean


def test_missing_subject_is_compatible_quirk() -> None:
    assert missing_subject_is_compatible_quirk(SchemaRegistryError(404, 40401, "no subject"))
    assert not missing_subject_is_compatible_quirk(SchemaRegistryError(404, 40402, "no version"))
    assert not missing_subject_is_compatible_quirk(SchemaRegistryError(409, 409, "incompatible"))


def test_settings_are_checked() -> None:
    with pytest.raises(SchemaError, match="url"):
        SchemaRegistry({})
    with pytest.raises(SchemaError, match="attempts"):
        SchemaRegistry("http://x", attempts=0)
    with pytest.raises(SchemaError, match="invalid schema registry settings"):
        SchemaRegistry({"url": "http://x", "no.such.setting": 1})
    registry = SchemaRegistry({"url": "http://u:secret@x:1"})
    assert registry.url == "http://x:1"
