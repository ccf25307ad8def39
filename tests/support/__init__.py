"""Helpers shared by the tests (fixtures stay in the conftest.py files). Importable as
`tests.support.<module>` because pyproject's pytest `pythonpath` holds the repository root.

    avro, pgtypes_encoders, pgoutput_strategies, assembler_script   pure-code unit tests
    pgoutput_pg, assembler_pg                 captures from the test PostgreSQL servers
    walsender, table_state                    the raw replication client; events -> table
    kafka                                     produce/consume on the test Kafka
    producer, cdc_checks, contract_table, snapshot    `pgcdc run` as a subprocess, read back
    events                                    change events by the producer's codec
    merge, merge_scenario, acceptance         the Spark merge job and the acceptance suite
"""
