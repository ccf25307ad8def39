"""Secrets as `env:NAME` / `file:/path` (connector/config.py): resolved for the DSN, SASL and
the registry's basic auth, with one clear error when the variable or file is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.config import load
from connector.errors import ConfigError


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_secrets_come_from_the_environment_and_files(tmp_path: Path) -> None:
    secret_file = _write(tmp_path / "sasl", "s3cret\n")
    config = _write(tmp_path / "c.yaml", f"""
dsn: env:MY_DSN
kafka: {{sasl.password: "file:{secret_file}", sasl.username: env:NOT_A_SECRET}}
schema_registry: {{basic.auth.user.info: env:REG_AUTH}}
""")
    cfg = load(config, {}, environ={"MY_DSN": "host=db password=pw", "REG_AUTH": "u:p"},
               validate=False)
    assert cfg.dsn == "host=db password=pw"
    assert cfg.kafka == {"sasl.password": "s3cret", "sasl.username": "env:NOT_A_SECRET"}
    assert cfg.schema_registry == {"basic.auth.user.info": "u:p"}


def test_a_missing_variable_or_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sasl.password: environment variable NOPE is not set"):
        load(None, {"kafka": {"sasl.password": "env:NOPE"}}, environ={}, validate=False)
    with pytest.raises(ConfigError, match="dsn: cannot read /nonexistent/pw: No such file"):
        load(None, {"dsn": "file:/nonexistent/pw"}, environ={}, validate=False)
