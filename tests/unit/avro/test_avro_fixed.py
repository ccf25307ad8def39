"""The fixed records load from the package data (connector/avro/schemas/) and are valid,
standalone Avro."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastavro import parse_schema

from connector.avro.fixed import FIXED_FILES, fixed_schema, schemas_dir
from connector.errors import SchemaError

REPO = Path(__file__).resolve().parents[3]


def test_found_in_the_package() -> None:
    packaged = REPO / "connector" / "avro" / "schemas"
    assert schemas_dir() == packaged
    for file_name in FIXED_FILES.values():
        assert (packaged / file_name).is_file()
    assert not list((REPO / "schemas").glob("*.avsc"))  # one copy only


@pytest.mark.parametrize("name", sorted(FIXED_FILES))
def test_each_is_valid_standalone_avro(name: str) -> None:
    schema = fixed_schema(name)
    parse_schema(schema)
    assert f"{schema['namespace']}.{schema['name']}" == name
    assert "pgcdc.Source" not in json.dumps(schema)  # references are inlined


def test_message_embeds_the_source_record() -> None:
    message = fixed_schema("pgcdc.Message")
    source = next(f for f in message["fields"] if f["name"] == "source")
    assert source["type"] == fixed_schema("pgcdc.Source")
    assert [f["name"] for f in message["fields"]] == [
        "op", "ts_ms", "prefix", "content", "transactional", "lsn", "source"]


def test_copies_are_independent() -> None:
    fixed_schema("pgcdc.Source")["fields"].clear()
    assert fixed_schema("pgcdc.Source")["fields"]


def test_unknown_record() -> None:
    with pytest.raises(SchemaError, match="no fixed Avro record"):
        fixed_schema("pgcdc.Nope")


def test_env_override_and_missing_dir(tmp_path: Path) -> None:
    for file_name in FIXED_FILES.values():
        packaged = REPO / "connector" / "avro" / "schemas" / file_name
        (tmp_path / file_name).write_text(packaged.read_text())
    code = "from connector.avro.fixed import schemas_dir; print(schemas_dir())"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PGCDC_SCHEMAS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
                           cwd=REPO, check=True)
    assert found.stdout.strip() == str(tmp_path)


def test_heartbeat_restart_lsn_is_a_compatible_addition() -> None:
    """Old heartbeats (no restart_lsn) read with the new schema say nothing (null); new ones
    read with the old schema lose only the new field."""
    import io

    from fastavro import schemaless_reader, schemaless_writer

    new = fixed_schema("pgcdc.Heartbeat")
    old = {**new, "fields": [f for f in new["fields"] if f["name"] != "restart_lsn"]}
    beat = {"name": "p", "db": "d", "ts_ms": 1, "lsn": 2}

    def read(record: dict[str, object], writer: dict[str, object], reader: dict[str, object]
             ) -> object:
        out = io.BytesIO()
        schemaless_writer(out, parse_schema(writer), record)
        out.seek(0)
        return schemaless_reader(out, parse_schema(writer), parse_schema(reader))
    assert read(beat, old, new) == {**beat, "restart_lsn": None}
    assert read({**beat, "restart_lsn": 7}, new, old) == beat
