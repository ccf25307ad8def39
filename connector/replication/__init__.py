"""The walsender edge: slot and publication admin, and the COPY BOTH replication stream."""

from .admin import ReplicationAdmin, SlotInfo, protocol_version_for
from .stream import ReplicationStream, StreamOptions

__all__ = ["ReplicationAdmin", "ReplicationStream", "SlotInfo", "StreamOptions",
           "protocol_version_for"]
