"""Helpers shared by the tests (fixtures stay in the conftest.py files). Importable as
`tests.support.<module>` because pyproject's pytest `pythonpath` holds the repository root.

    avro, pgtypes_encoders, pgoutput_strategies, assembler_script   pure-code unit tests
    pgoutput_pg, assembler_pg                 captures from the test PostgreSQL servers
    walsender                                 the one raw replication client
    kafka                                     produce/consume on the test Kafka
    producer                                  the one `pgcdc run` subprocess (ProducerRun)
    cdc_checks, contract_table, snapshot      read back what it published (read_records)
    table_state                               the one fold of change events into a table
    merge, merge_scenario, acceptance         the Spark merge job and the acceptance suite
"""
