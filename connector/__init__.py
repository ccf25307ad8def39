"""pgcdc: PostgreSQL logical replication (pgoutput) to Kafka as Avro, merged into Delta Lake."""

import warnings

__version__ = "0.1.0"

# confluent-kafka's Schema Registry client imports authlib's httpx integration, which warns on
# import (nothing a user can act on). authlib.deprecate installs an "always" filter for its
# category when imported, so this one goes in after it, in front: that one warning only.
# Without authlib (a Spark executor given only the wheel by --py-files, which runs the
# Debezium-format decoders and nothing of the producer) there is nothing to filter.
try:
    from authlib.deprecate import AuthlibDeprecationWarning  # type: ignore[import-untyped]
except ImportError:
    pass
else:
    warnings.filterwarnings("ignore", message=r"The httpx module is deprecated",
                            category=AuthlibDeprecationWarning)
