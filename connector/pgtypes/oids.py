"""OIDs of the built-in PostgreSQL types pgtypes knows, and of their array types.

The values are fixed by PostgreSQL's bootstrap catalog (``pg_type.dat``) and identical in every
supported major version; ``tests/integration/pgtypes`` checks them against real servers.
"""

from __future__ import annotations

from typing import Final

BOOL: Final = 16
BYTEA: Final = 17
CHAR: Final = 18  # the one-byte internal type "char", not char(n) (that is BPCHAR)
NAME: Final = 19
INT8: Final = 20
INT2: Final = 21
INT2VECTOR: Final = 22  # space-separated in text, array_send's format in binary
INT4: Final = 23
TEXT: Final = 25
OID: Final = 26
OIDVECTOR: Final = 30  # like INT2VECTOR
XID: Final = 28
CID: Final = 29
JSON: Final = 114
XML: Final = 142
CIDR: Final = 650
FLOAT4: Final = 700
FLOAT8: Final = 701
UNKNOWN: Final = 705
MACADDR8: Final = 774
MONEY: Final = 790
MACADDR: Final = 829
INET: Final = 869
BPCHAR: Final = 1042
VARCHAR: Final = 1043
DATE: Final = 1082
TIME: Final = 1083
TIMESTAMP: Final = 1114
TIMESTAMPTZ: Final = 1184
INTERVAL: Final = 1186
TIMETZ: Final = 1266
BIT: Final = 1560
VARBIT: Final = 1562
NUMERIC: Final = 1700
UUID: Final = 2950
PG_LSN: Final = 3220
JSONB: Final = 3802
XID8: Final = 5069

#: name (as in ``pg_type.typname``) of each built-in scalar type, by OID
NAMES: Final[dict[int, str]] = {
    BOOL: "bool",
    BYTEA: "bytea",
    CHAR: "char",
    NAME: "name",
    INT8: "int8",
    INT2: "int2",
    INT4: "int4",
    TEXT: "text",
    OID: "oid",
    XID: "xid",
    CID: "cid",
    JSON: "json",
    XML: "xml",
    CIDR: "cidr",
    FLOAT4: "float4",
    FLOAT8: "float8",
    UNKNOWN: "unknown",
    MACADDR8: "macaddr8",
    MONEY: "money",
    MACADDR: "macaddr",
    INET: "inet",
    BPCHAR: "bpchar",
    VARCHAR: "varchar",
    DATE: "date",
    TIME: "time",
    TIMESTAMP: "timestamp",
    TIMESTAMPTZ: "timestamptz",
    INTERVAL: "interval",
    TIMETZ: "timetz",
    BIT: "bit",
    VARBIT: "varbit",
    NUMERIC: "numeric",
    UUID: "uuid",
    PG_LSN: "pg_lsn",
    JSONB: "jsonb",
    XID8: "xid8",
}

#: OID of the array type of each built-in scalar type (``pg_type.typarray``)
ARRAY_OF: Final[dict[int, int]] = {
    BOOL: 1000,
    BYTEA: 1001,
    CHAR: 1002,
    NAME: 1003,
    INT8: 1016,
    INT2: 1005,
    INT4: 1007,
    TEXT: 1009,
    OID: 1028,
    XID: 1011,
    CID: 1012,
    JSON: 199,
    XML: 143,
    CIDR: 651,
    FLOAT4: 1021,
    FLOAT8: 1022,
    MACADDR8: 775,
    MONEY: 791,
    MACADDR: 1040,
    INET: 1041,
    BPCHAR: 1014,
    VARCHAR: 1015,
    DATE: 1182,
    TIME: 1183,
    TIMESTAMP: 1115,
    TIMESTAMPTZ: 1185,
    INTERVAL: 1187,
    TIMETZ: 1270,
    BIT: 1561,
    VARBIT: 1563,
    NUMERIC: 1231,
    UUID: 2951,
    PG_LSN: 3221,
    JSONB: 3807,
    XID8: 271,
}

#: element OID of each built-in array type (the inverse of :data:`ARRAY_OF`)
ELEMENT_OF: Final[dict[int, int]] = {array: element for element, array in ARRAY_OF.items()}

#: element OID of each built-in *vector* type: typed arrays of their own (``pg_type.typelem``
#: set, variable length) whose text is space-separated (``1 2 3``), not ``{1,2,3}``; their
#: binary form is array_send's. Not in :data:`NAMES`: they load as arrays.
VECTOR_OF: Final[dict[int, int]] = {INT2VECTOR: INT2, OIDVECTOR: OID}

#: OID of the array type of each vector type (``int2vector[]``, ``oidvector[]``)
VECTOR_ARRAY_OF: Final[dict[int, int]] = {INT2VECTOR: 1006, OIDVECTOR: 1013}

#: Built-in types pgtypes does not load (not in :data:`NAMES`: their values are their text, as
#: any unknown type's); named here for the Debezium value format, which encodes them specially
#: (connector/avro/debezium_types.py).
POINT: Final = 600
TSVECTOR: Final = 3614

#: OIDs below this are PostgreSQL's own; pgoutput sends a Type message only for OIDs at or above it
FIRST_GENBKI_OBJECT_ID: Final = 10000
