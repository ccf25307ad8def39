"""Secrets never printed: URL credentials, libpq passwords, secret settings."""

from __future__ import annotations

import logging

import pytest

from connector.redact import RedactSecrets, redact


@pytest.mark.parametrize(("text", "expected"), [
    ("POST http://reg:s3cret@127.0.0.1:8081/apis/ccompat/v7/subjects/x-value/versions",
     "POST http://***@127.0.0.1:8081/apis/ccompat/v7/subjects/x-value/versions"),
    ("https://token@host/x", "https://***@host/x"),
    ("postgresql://app:pw@db:5432/shop?sslmode=require", "postgresql://***@db:5432/shop?sslmode=require"),
    ("host=db port=5432 password=hunter2 user=app", "host=db port=5432 password=*** user=app"),
    ("host=db password='a b\\' c' user=app", "host=db password=*** user=app"),
    ("sasl.password=hunter2, ssl.key.password: k", "sasl.password=***, ssl.key.password: ***"),
    ("basic.auth.user.info=u:p", "basic.auth.user.info=***"),
    ("nothing secret at user@example.com here", "nothing secret at user@example.com here"),
    ("connection to server at \"127.0.0.1\", port 5432 failed",
     "connection to server at \"127.0.0.1\", port 5432 failed"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_filter_redacts_formatted_messages() -> None:
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s",
                               ("POST", "http://u:pw@h/x"), None)
    assert RedactSecrets().filter(record)
    assert record.getMessage() == "HTTP Request: POST http://***@h/x"
