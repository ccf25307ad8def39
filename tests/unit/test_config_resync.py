"""`resync_on_ddl` (connector/snapshot/incremental/resync.py): on by default, off from the YAML
file or `--no-resync-on-ddl`."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.cli import build_parser
from connector.config import load
from connector.errors import ConfigError
from connector.tools.run import config_from_args

REQUIRED = {"dsn": "host=db", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}
FLAGS = ["run", "--dsn", "host=db", "--bootstrap-servers", "k:9092", "--schema-registry-url",
         "http://r"]


def test_on_by_default() -> None:
    assert load(None, dict(REQUIRED), environ={}).resync_on_ddl is True
    assert config_from_args(build_parser().parse_args(FLAGS)).resync_on_ddl is True


@pytest.mark.parametrize("line", ["resync_on_ddl: false", "resync-on-ddl: no"])
def test_off_in_the_yaml_file(tmp_path: Path, line: str) -> None:
    config = tmp_path / "pgcdc.yaml"
    config.write_text(line + "\n")
    assert load(str(config), dict(REQUIRED), environ={}).resync_on_ddl is False


def test_flags_override_the_file(tmp_path: Path) -> None:
    config = tmp_path / "pgcdc.yaml"
    config.write_text("resync_on_ddl: false\n")
    args = build_parser().parse_args([*FLAGS, "--config", str(config), "--resync-on-ddl"])
    assert config_from_args(args).resync_on_ddl is True
    args = build_parser().parse_args([*FLAGS, "--no-resync-on-ddl"])
    assert config_from_args(args).resync_on_ddl is False


def test_a_wrong_value_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "pgcdc.yaml"
    config.write_text("resync_on_ddl: sometimes\n")
    with pytest.raises(ConfigError, match="resync_on_ddl: expected true or false"):
        load(str(config), dict(REQUIRED), environ={})
