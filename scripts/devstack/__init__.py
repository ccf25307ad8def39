"""The local real stack: PostgreSQL, Apache Kafka (KRaft), Apicurio Registry and Spark jars.

Used by `scripts/stack` (up/down/status/env) and by the pytest fixtures, so the tests run
against exactly the servers a developer runs by hand. Standard library only: it must work
before anything else is installed.
"""

from .errors import StackError

__all__ = ["StackError"]
