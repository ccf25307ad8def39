"""The walsender edge: slot and publication admin, and the COPY BOTH replication stream."""

from .admin import ReplicationAdmin
from .features import ServerFeatures
from .slots import SlotInfo
from .stream import ReplicationStream, StreamOptions

__all__ = ["ReplicationAdmin", "ReplicationStream", "SlotInfo", "StreamOptions",
           "ServerFeatures"]
