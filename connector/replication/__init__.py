"""The walsender edge: slot and publication admin, and the COPY BOTH replication stream."""

from .admin import ReplicationAdmin, SlotInfo
from .features import ServerFeatures
from .stream import ReplicationStream, StreamOptions

__all__ = ["ReplicationAdmin", "ReplicationStream", "SlotInfo", "StreamOptions",
           "ServerFeatures"]
