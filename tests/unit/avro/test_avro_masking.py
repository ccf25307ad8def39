"""Column masks (connector/avro/masking.py): each masked value is its mask of the value's
PostgreSQL text, alike from text tuples, binary tuples and COPY lines, by the C and the Python
writer, in ``before``, ``after`` and the key; the schema says what the field is now; nothing
of the clear value is in the bytes written."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.avro import SourceInfo, TableCodec, decode, derive_table_schemas
from connector.avro.masking import ColumnMask, Masking, MaskRule, parse_mask, pg_text
from connector.errors import ConfigError, SchemaError
from connector.pgoutput.messages import UNCHANGED_TOAST, BinaryValue
from connector.pgtypes import oids
from connector.replication.published import (
    parse_table_settings,
    refusals,
    with_exclusions,
)
from tests.support.avro import catalog, column, copy_line, relation

# This module builds its C and Python codecs itself (conftest.py runs it once).
COMPARES_BOTH_WRITERS = True
SALT = b"pepper-\xc3\xa9-salt"
SOURCE = SourceInfo(0x16B3748, 3, 1_700_000_000_000, 731, 0x16B3700)
MASKS = {"id": MaskRule("hash"), "email": MaskRule("hash"), "name": MaskRule("truncate", 3),
         "phone": MaskRule("null"), "code": MaskRule("hash")}
# id: a hashed key; code: a hashed uuid; plain: not masked
COLUMNS = [("id", oids.INT8, True), ("email", oids.TEXT, False), ("name", oids.VARCHAR, False),
           ("phone", oids.TEXT, False), ("code", oids.UUID, False), ("plain", oids.INT4, False)]


def _hmac(text: str, encoding: str = "hex") -> str:
    mac = hmac.new(SALT, text.encode(), hashlib.sha256)
    return mac.hexdigest() if encoding == "hex" else base64.b64encode(mac.digest()).decode()


def _codec(encoding: str = "hex", python: bool = False, binary: bool = False) -> TableCodec:
    rel = relation(*(column(n, oid, key=k) for n, oid, k in COLUMNS))
    masking = Masking((("public.t", tuple(MASKS.items())),), SALT, encoding, binary)
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d",
                                   masks=masking.for_table("public", "t"), binary=binary)
    codec = TableCodec(schemas, 21, 22, catalog())
    if python:  # the Python writer throughout
        codec._plan = None
        codec._frame.native = None
    return codec


FAST, PYTHON, BASE64 = _codec(), _codec(python=True), _codec("base64")
BINARY = _codec(binary=True)
# what every event of the table carries whatever its values (the source block: "postgres"...)
CONSTANT = b"".join(FAST.change_from_tuples("u", (None,) * 6, (None,) * 6, SOURCE, ts_ms=5)[1:])


def _read(codec: TableCodec, key: bytes | None, value: bytes) -> tuple[Any, Any]:
    k = None if key is None else decode(key, lambda _: codec.schemas.key_schema).value
    return k, decode(value, lambda _: codec.schemas.value_schema).value


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=12)
ROW = st.tuples(st.integers(-(2**63), 2**63 - 1).map(str), st.one_of(st.none(), TEXT),
                st.one_of(st.none(), TEXT), st.one_of(st.none(), TEXT),
                st.one_of(st.none(), st.uuids().map(str)),
                st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1).map(str)))


def _expected(row: tuple[Any, ...], encoding: str = "hex") -> dict[str, Any]:
    id_, email, name, _phone, code, plain = row
    return {"id": _hmac(id_, encoding),
            "email": None if email is None else _hmac(email, encoding),
            "name": None if name is None else name[:3], "phone": None,
            "code": None if code is None else _hmac(code, encoding),
            "plain": None if plain is None else int(plain)}


def _binary(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The same row as binary tuples carry it (send functions' output)."""
    id_, email, name, phone, code, plain = row
    return (BinaryValue(struct.pack("!q", int(id_))),
            None if email is None else BinaryValue(email.encode()),
            None if name is None else BinaryValue(name.encode()),
            None if phone is None else BinaryValue(phone.encode()),
            None if code is None else BinaryValue(UUID(code).bytes),
            None if plain is None else BinaryValue(struct.pack("!i", int(plain))))


@settings(max_examples=120, deadline=None)
@given(ROW, ROW)
def test_every_path_publishes_the_mask_of_the_text(old: tuple[Any, ...],
                                                   new: tuple[Any, ...]) -> None:
    binary_codec = BINARY
    key, value = FAST.change_from_tuples("u", old, new, SOURCE, ts_ms=5)
    # the C and the Python writer, text and binary tuples: the same bytes
    assert PYTHON.change_from_tuples("u", old, new, SOURCE, ts_ms=5) == (key, value)
    assert binary_codec.change_from_tuples("u", _binary(old), _binary(new), SOURCE,
                                           ts_ms=5) == (key, value)
    k, v = _read(FAST, key, value)
    assert v["before"] == _expected(old) and v["after"] == _expected(new)
    assert k == {"id": _hmac(new[0])}  # the key record agrees with the value's
    assert v["unparsed"] is None and v["unchanged_toast"] == []
    # a snapshot's COPY line (C and Python) and a delete's old key: the same key bytes
    line = copy_line(new)
    assert FAST.change_from_copy("r", line, SOURCE, ts_ms=5)[0] == key
    assert PYTHON.change_from_copy("r", line, SOURCE, ts_ms=5)[0] == key
    assert FAST.key_from_tuple(new) == PYTHON.key_from_tuple(new) == key
    assert binary_codec.key_from_tuple(_binary(new)) == key
    delete_key, _ = FAST.change_from_tuples("d", new, None, SOURCE, ts_ms=5)
    assert delete_key == key
    # nothing of a clear hashed or nulled value is in the bytes (long enough not to occur by
    # chance; a truncated one keeps its first characters by design)
    kept = CONSTANT + b"|".join((t or "")[:3].encode() for t in (old[2], new[2]))
    for text in (old[1], old[3], old[4], new[1], new[3], new[4]):
        if text is not None and len(text.encode()) >= 8 and text.encode() not in kept:
            assert text.encode() not in key + value
    # base64
    _, v64 = _read(BASE64, *BASE64.change_from_tuples("c", None, new, SOURCE, ts_ms=5))
    assert v64["after"] == _expected(new, "base64")


def test_unchanged_toast_of_a_masked_column_stays_listed_and_null() -> None:
    row = ("7", UNCHANGED_TOAST, "abcdef", None, None, "1")
    _, v = _read(FAST, *FAST.change_from_tuples("u", None, row, SOURCE, ts_ms=5))
    assert v["after"]["email"] is None and v["unchanged_toast"] == ["email"]
    assert v["after"]["name"] == "abc"


def test_the_schema_says_what_each_field_is_now() -> None:
    fields = {f["name"]: f["type"][1] for f in
              FAST.schemas.value_schema["fields"][0]["type"][1]["fields"]}
    assert fields["email"] == {"type": "string", "connect.parameters": {
        "__debezium.source.column.type": "TEXT", "pgcdc.mask": "hash-hex"}}
    assert fields["name"]["type"] == "string"
    assert fields["name"]["connect.parameters"]["pgcdc.mask"] == "truncate 3"
    assert fields["code"]["type"] == "string" and "logicalType" not in fields["code"]
    assert fields["id"]["type"] == "string"  # the hashed key: a string in key and value
    assert FAST.schemas.key_schema["fields"][0]["type"][1]["type"] == "string"
    # null keeps its type; plain is untouched
    assert fields["phone"]["type"] == "string" and \
        fields["phone"]["connect.parameters"]["pgcdc.mask"] == "null"
    assert fields["plain"]["type"] == "int" and "pgcdc.mask" not in str(fields["plain"])
    assert SALT.decode() not in FAST.schemas.value_json + str(FAST.schemas.key_json)


def test_a_masked_column_drops_its_connect_default() -> None:
    rel = relation(column("id", oids.INT4, key=True), column("email", oids.TEXT),
                   column("n", oids.INT4))
    masks = {"email": ColumnMask(MaskRule("hash"), SALT),
             "n": ColumnMask(MaskRule("null"), SALT)}
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d", masks=masks,
                                   defaults={"email": "'clear@example.com'::text", "n": "42"})
    assert "clear@example.com" not in schemas.value_json
    assert '"connect.default":42' not in schemas.value_json
    plain = derive_table_schemas(rel, catalog(), prefix="p", db="d",
                                 defaults={"email": "'clear@example.com'::text", "n": "42"})
    assert "clear@example.com" in plain.value_json  # what the mask removed


def test_binary_tuples_refuse_a_hash_of_a_type_without_exact_text() -> None:
    rel = relation(column("id", oids.INT4, key=True), column("at", oids.TIMESTAMPTZ))
    masks = {"at": ColumnMask(MaskRule("hash"), SALT)}
    with pytest.raises(SchemaError, match="set binary: false"):
        derive_table_schemas(rel, catalog(), prefix="p", db="d", masks=masks, binary=True)
    derive_table_schemas(rel, catalog(), prefix="p", db="d", masks=masks)  # text: fine
    masks = {"at": ColumnMask(MaskRule("null"), SALT)}
    derive_table_schemas(rel, catalog(), prefix="p", db="d", masks=masks, binary=True)


@given(st.one_of(st.integers(), st.booleans(), st.uuids(), st.binary(), TEXT))
def test_pg_text_of_loaded_binary_values(value: Any) -> None:
    expected = {bool: lambda v: "t" if v else "f", bytes: lambda v: "\\x" + v.hex()}.get(
        type(value), str)(value)
    assert pg_text(value) == expected


def test_parse_mask_shapes_and_one_line_errors() -> None:
    assert parse_mask("w", {"a": "hash", "b": None, "c": "null", "d": "exclude",
                            "e": {"truncate": 3}}) == {
        "a": MaskRule("hash"), "b": MaskRule("null"), "c": MaskRule("null"),
        "d": MaskRule("exclude"), "e": MaskRule("truncate", 3)}
    for bad in ({"a": "sha1"}, {"a": {"truncate": -1}}, {"a": {"truncate": "3"}},
                {"a": {"truncate": 3, "x": 1}}, [], {}, {"a": True}):
        with pytest.raises(ConfigError) as caught:
            parse_mask("table_settings: 't'", bad)
        assert "\n" not in str(caught.value)


def test_exclusion_is_the_column_list_and_a_key_cannot_be_excluded() -> None:
    [setting] = parse_table_settings({"t": {"mask": {"ssn": "exclude", "email": "hash"}}})
    assert with_exclusions(setting, ["id", "email", "ssn"]).columns == ("id", "email")
    [listed] = parse_table_settings({"t": {"columns": ["id", "ssn"],
                                           "mask": {"ssn": "exclude"}}})
    assert with_exclusions(listed, ["id", "email", "ssn"]).columns == ("id",)
    assert refusals("public", "t", listed, ["id", "email", "ssn"], ["id"], [],
                    publishes_update_or_delete=True, generated_allowed=False) == []
    [unlisted] = parse_table_settings({"t": {"columns": ["id"], "mask": {"ssn": "hash"}}})
    assert "that its columns list leaves out" in refusals(
        "public", "t", unlisted, ["id", "ssn"], ["id"], [], publishes_update_or_delete=True,
        generated_allowed=False)[0]
    kw = {"publishes_update_or_delete": True, "generated_allowed": False}
    assert refusals("public", "t", setting, ["id", "email", "ssn"], ["id"], [], **kw) == []
    [key] = parse_table_settings({"t": {"mask": {"id": "exclude"}}})
    [line] = refusals("public", "t", key, ["id", "email"], ["id"], [], **kw)
    assert "cannot exclude replica identity (key) column(s) id of public.t" in line
    [unknown] = parse_table_settings({"t": {"mask": {"nope": "hash"}}})
    assert "mask names column(s) nope that public.t does not have" in \
        refusals("public", "t", unknown, ["id"], ["id"], [], **kw)[0]


def test_config_needs_a_salt_for_hash_and_never_shows_it(tmp_path: Any) -> None:
    from connector.config import load

    base = {"dsn": "host=x", "bootstrap_servers": "k:1", "schema_registry_url": "http://r"}
    config = tmp_path / "pgcdc.yaml"
    config.write_text("table_settings: {t: {mask: {email: hash}}}\n")
    with pytest.raises(ConfigError, match="a hash mask needs mask_salt"):
        load(str(config), base, environ={})
    config.write_text("table_settings: {t: {mask: {email: hash}}}\n"
                      "mask_salt: env:SALT_VAR\nmask_hash_encoding: base64\n")
    cfg = load(str(config), base, environ={"SALT_VAR": "s3cr3t-salt"})
    assert cfg.mask_salt == "s3cr3t-salt" and "s3cr3t-salt" not in repr(cfg)
    masking = cfg.masking()
    assert "s3cr3t-salt" not in repr(masking) and masking.salt == b"s3cr3t-salt"
    assert masking.for_table("public", "t")["email"].encoding == "base64"
    assert masking.for_table("public", "other") == {}
    config.write_text("mask_hash_encoding: base32\n")
    with pytest.raises(ConfigError, match="mask_hash_encoding must be one of hex, base64"):
        load(str(config), base, environ={})


def test_status_line_and_redaction_of_the_salt() -> None:
    from connector.avro.masking import rules_summary
    from connector.redact import redact

    [setting] = parse_table_settings({"t": {"mask": {"email": "hash", "phone": None,
                                                     "name": {"truncate": 3},
                                                     "ssn": "exclude"}}})
    assert rules_summary(dict(setting.mask)) == \
        "masks: email hash, phone null, name truncate 3; excluded: ssn"
    assert redact("mask_salt: pepper123 and mask_salt=pepper123") == \
        "mask_salt: *** and mask_salt=***"


def test_a_masked_column_renamed_while_running_stops_instead_of_leaking() -> None:
    """ALTER TABLE ... RENAME COLUMN email TO mail: the next Relation has no `email`; its values
    would go out in clear under the new name, so the schema derivation refuses it."""
    rel = relation(column("id", oids.INT4, key=True), column("mail", oids.TEXT))
    with pytest.raises(SchemaError, match=r"mask names column\(s\) email that public.t no "
                                          "longer publishes"):
        derive_table_schemas(rel, catalog(), prefix="p", db="d",
                             masks={"email": ColumnMask(MaskRule("hash"), SALT)})


def test_an_excluded_column_in_a_relation_stops_instead_of_leaking() -> None:
    """A user's publication (create_publication false) that starts sending an excluded column
    while pgcdc runs (its column list changed): the schema derivation refuses the Relation, so
    the clear value is never published; the masking hands the codecs the excluded names."""
    masking = Masking((("public.t", (("ssn", MaskRule("exclude")), ("email", MaskRule("hash")))),),
                      SALT)
    assert masking.excluded_for("public", "t") == ("ssn",)
    assert masking.excluded_for("public", "u") == ()
    rel = relation(column("id", oids.INT4, key=True), column("email", oids.TEXT),
                   column("ssn", oids.TEXT))
    with pytest.raises(SchemaError, match=r"mask excludes column\(s\) ssn of public.t, but the "
                                          "publication publishes them"):
        derive_table_schemas(rel, catalog(), prefix="p", db="d",
                             masks=masking.for_table("public", "t"),
                             excluded=masking.excluded_for("public", "t"))
    fine = relation(column("id", oids.INT4, key=True), column("email", oids.TEXT))
    schemas = derive_table_schemas(fine, catalog(), prefix="p", db="d",
                                   masks=masking.for_table("public", "t"),
                                   excluded=masking.excluded_for("public", "t"))
    assert [f["name"] for f in schemas.value_schema["fields"][0]["type"][1]["fields"]] == \
        ["id", "email"]
