"""pgcdc: PostgreSQL logical replication (pgoutput) to Kafka as Avro, merged into Delta Lake."""

import warnings

from authlib.deprecate import AuthlibDeprecationWarning  # type: ignore[import-untyped]

__version__ = "0.1.0"

# confluent-kafka's Schema Registry client imports authlib's httpx integration, which warns on
# import (nothing a user can act on). authlib.deprecate installs an "always" filter for its
# category when imported, so this one goes in after it, in front: that one warning only.
warnings.filterwarnings("ignore", message=r"The httpx module is deprecated",
                        category=AuthlibDeprecationWarning)
