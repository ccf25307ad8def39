"""Secrets out of everything pgcdc prints: URL credentials, libpq passwords, secret settings.

Third-party libraries log what they are given -- httpx logs every request URL, user:password
included, at INFO -- so `pgcdc run` puts `RedactSecrets` on its log handlers, and the CLI
redacts the one error line it prints.

    redact("http://user:pw@registry:8081/x")      -> "http://***@registry:8081/x"
    redact("host=db password='s e c' user=app")   -> "host=db password=*** user=app"
    redact("sasl.password=hunter2")               -> "sasl.password=***"
"""

from __future__ import annotations

import logging
import re
from typing import Final

__all__ = ["RedactSecrets", "redact"]

_URL_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/@]+@")
# libpq keyword DSNs (password=..., quoted or not) and settings such as sasl.password=...,
# ssl.key.password: ..., basic.auth.user.info=..., client.secret=..., mask_salt: ...
_SECRET_SETTING: Final = re.compile(
    r"(?P<key>\b[\w.-]*(?:password|passwd|secret|user\.info|token|salt)\s*[=:]\s*)"
    r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;&'\"]+)", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with credentials replaced by ``***``."""
    if "@" in text:
        text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    return _SECRET_SETTING.sub(r"\g<key>***", text)


class RedactSecrets(logging.Filter):
    """A handler filter: formats the record's message once, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
