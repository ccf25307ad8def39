"""Issue 24, the pure part of the registry watch: the line pgcdc stops with when a schema id
it publishes with no longer resolves, and `check_ids` raising what a sweep found (the real
round trip with a deleted subject: tests/integration/producer/test_producer_deleted.py)."""

from __future__ import annotations

import pytest

from connector.avro.registry import SchemaRegistry, gone_id_message, subject_topic
from connector.errors import SchemaError


def test_subject_topic_undoes_the_topic_name_strategy() -> None:
    assert subject_topic("app.public.t-value") == "app.public.t"
    assert subject_topic("app.public.t-key") == "app.public.t"
    assert subject_topic("other") == "other"


def test_the_gone_id_line_names_id_subject_topic_and_what_to_do() -> None:
    line = gone_id_message("http://r:8081", 42, "app.public.t-value")
    assert "\n" not in line
    assert line.startswith("schema registry http://r:8081 no longer knows schema id 42 "
                           "(subject app.public.t-value")
    assert "records of topic app.public.t" in line
    assert "re-snapshot" in line and "registers the schema again" in line


def test_check_ids_raises_what_the_watch_found_and_nothing_before() -> None:
    registry = SchemaRegistry("http://127.0.0.1:1")
    registry.check_ids()  # nothing found yet: no request, no error
    registry._gone = SchemaError(gone_id_message(registry.url, 7, "a.b.c-key"))
    with pytest.raises(SchemaError, match="no longer knows schema id 7"):
        registry.check_ids()
    assert registry.calls == 0
