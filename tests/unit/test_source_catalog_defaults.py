"""Which column defaults are constants (connector/source_catalog.py), over node trees of the
form ``pg_attrdef.adbin`` has (the integration test reads real ones from PostgreSQL)."""

from __future__ import annotations

from connector.source_catalog import constant_defaults, default_functions

LITERAL = ("{CONST :consttype 25 :consttypmod -1 :constcollid 100 :constlen -1 :constbyval false"
           " :constisnull false :location 40 :constvalue 8 [ 32 0 0 0 100 102 108 116 ]}")
CAST = ("{FUNCEXPR :funcid 1781 :funcresulttype 1700 :funcretset false :funcvariadic false"
        " :funcformat 2 :funccollid 0 :inputcollid 0 :args (" + LITERAL + ") :location -1}")
SUM = ("{OPEXPR :opno 551 :opfuncid 177 :opresulttype 23 :opretset false :opcollid 0"
       " :inputcollid 0 :args (" + LITERAL + " " + LITERAL + ") :location 12}")
NEXTVAL = ("{FUNCEXPR :funcid 1574 :funcresulttype 20 :funcretset false :funcvariadic false"
           " :funcformat 0 :funccollid 0 :inputcollid 0"
           " :args ({CONST :consttype 2205 :constvalue 4 [ 1 2 0 0 ]}) :location 60}")
CURRENT_TIMESTAMP = "{SQLVALUEFUNCTION :op 3 :type 1184 :typmod -1 :location 100}"
SUBLINK = "{SUBLINK :subLinkType 4 :subLinkId 0 :testexpr <> :operName <> :subselect {QUERY}}"


def test_default_functions_of_literals_and_calls() -> None:
    assert default_functions(LITERAL) == set()
    assert default_functions(CAST) == {1781}
    assert default_functions(SUM) == {177}
    assert default_functions(NEXTVAL) == {1574}


def test_other_nodes_are_never_constant() -> None:
    assert default_functions(CURRENT_TIMESTAMP) is None
    assert default_functions(SUBLINK) is None


def test_constant_defaults_need_every_call_immutable() -> None:
    rows = [("lit", LITERAL, "'dflt'::text", "text"),
            ("cast", CAST, "1.5", "numeric(10,2)"),
            ("sum", SUM, "2 + 3", "integer"),
            ("seq", NEXTVAL, "nextval('s'::regclass)", "bigint"),
            ("now", CURRENT_TIMESTAMP, "CURRENT_TIMESTAMP", "timestamp with time zone")]
    assert constant_defaults(rows, immutable={1781, 177}) == {
        "lit": "CAST(('dflt'::text) AS text)",
        "cast": "CAST((1.5) AS numeric(10,2))",
        "sum": "CAST((2 + 3) AS integer)",
    }
    assert constant_defaults(rows, immutable=set()) == {"lit": "CAST(('dflt'::text) AS text)"}
