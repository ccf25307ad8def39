"""The sink package takes its settings as parameters: it never reads the configuration."""

from __future__ import annotations

from tests.unit.test_layering import offending


def test_the_sink_does_not_import_the_configuration() -> None:
    assert offending(("connector/sink",), ("connector.config",)) == []
