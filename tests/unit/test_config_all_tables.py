"""`--all-tables-publication` / `all_tables_publication` (issue 33, connector/config.py): with
`--tables '*'`, FOR ALL TABLES only when asked for; the default is a table list pgcdc keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.cli import build_parser
from connector.config import load
from connector.errors import ConfigError
from connector.tools.run import config_from_args

REQUIRED = {"dsn": "host=db", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}


def test_all_tables_publication_is_an_explicit_opt_in(tmp_path: Path) -> None:
    """Issue 33: `*` is a table list pgcdc keeps unless FOR ALL TABLES is asked for, from the
    YAML file or the flag; it needs `*` and cannot leave keyless tables out (skip)."""
    assert load(None, dict(REQUIRED), environ={}).all_tables_publication is False
    config = tmp_path / "pgcdc.yaml"
    config.write_text("all-tables-publication: true\nkeyless_tables: full\n")
    assert load(str(config), dict(REQUIRED), environ={}).all_tables_publication is True
    args = build_parser().parse_args([
        "run", "--dsn", "host=db", "--bootstrap-servers", "k:9092", "--schema-registry-url",
        "http://r", "--all-tables-publication"])
    assert config_from_args(args).all_tables_publication is True
    with pytest.raises(ConfigError, match="all_tables_publication .* needs --tables '\\*'"):
        load(None, {**REQUIRED, "all_tables_publication": True, "tables": "public.a"},
             environ={})
    with pytest.raises(ConfigError, match="cannot leave tables without a key out"):
        load(None, {**REQUIRED, "all_tables_publication": True, "keyless_tables": "skip"},
             environ={})
