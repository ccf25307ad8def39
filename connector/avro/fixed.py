"""The fixed records (`connector/avro/schemas/*.avsc`, package data), loaded once at import.

They are read from ``$PGCDC_SCHEMAS_DIR`` if set (a deployment may pin its own copy), else from
the package itself, so a checkout, an editable install and a wheel read the same single copy.
The contract around them is documented in the top-level ``schemas/README.md``.

A file may name another fixed record by its full name (``"type": "pgcdc.Source"``);
`fixed_schema` returns standalone JSON with the first use replaced by the definition, because a
registry subject holds one self-contained schema.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from connector.errors import SchemaError

__all__ = ["FIXED_FILES", "fixed_schema", "schemas_dir"]

#: full record name -> file name
FIXED_FILES: Final[dict[str, str]] = {
    "pgcdc.Source": "source.avsc",
    "pgcdc.Transaction": "transaction_block.avsc",
    "pgcdc.TransactionMetadata": "transaction.avsc",
    "pgcdc.Heartbeat": "heartbeat.avsc",
    "pgcdc.Message": "message.avsc",
}


def _candidates() -> Iterator[Path]:
    env = os.environ.get("PGCDC_SCHEMAS_DIR")
    if env:
        yield Path(env)
    yield Path(__file__).resolve().parent / "schemas"


def schemas_dir() -> Path:
    """The directory the fixed records are read from (see the module docstring)."""
    tried = []
    for path in _candidates():
        if (path / "source.avsc").is_file():
            return path
        tried.append(str(path))
    raise SchemaError("fixed Avro schemas (source.avsc ...) not found in " + ", ".join(tried))


def _load_all() -> dict[str, dict[str, Any]]:
    base = schemas_dir()
    loaded: dict[str, dict[str, Any]] = {}
    for full_name, file_name in FIXED_FILES.items():
        path = base / file_name
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SchemaError(f"cannot read fixed Avro schema {path}: {exc}") from None
        found = f"{schema.get('namespace')}.{schema.get('name')}"
        if found != full_name:
            raise SchemaError(f"{path} defines {found}, expected {full_name}")
        loaded[full_name] = schema
    return loaded


_RAW: Final = _load_all()


def _inline(node: Any, defined: set[str]) -> Any:
    """Replace the first reference to each fixed record by its definition (in place order)."""
    if isinstance(node, str):
        if node in _RAW and node not in defined:
            defined.add(node)
            return _inline(copy.deepcopy(_RAW[node]), defined)
        return node
    if isinstance(node, list):
        return [_inline(item, defined) for item in node]
    if isinstance(node, dict):
        if node.get("type") == "record":
            defined.add(f"{node.get('namespace', 'pgcdc')}.{node['name']}")
        out = {}
        for key, value in node.items():
            if key in ("type", "items", "values", "fields"):
                out[key] = _inline(value, defined)
            else:
                out[key] = value
        return out
    return node


def fixed_schema(full_name: str, *, defined: set[str] | None = None) -> dict[str, Any]:
    """A fresh, standalone copy of a fixed record's schema (e.g. ``"pgcdc.Message"``).

    `defined`: full names already defined earlier in an enclosing schema; those stay references
    (and the names defined here are added to it).
    """
    if full_name not in _RAW:
        raise SchemaError(f"no fixed Avro record {full_name}; known: {', '.join(_RAW)}")
    seen = set() if defined is None else defined
    seen.add(full_name)
    result: dict[str, Any] = _inline(copy.deepcopy(_RAW[full_name]), seen)
    return result
