"""The prefixes of pgcdc's own logical decoding messages, in one place: the stream's reader
(connector/publisher.py) tells them from users' messages, their writers emit them.

- `HEARTBEAT_PREFIX`: `Pipeline._heartbeat`'s transactional message; never published as a
  message, it makes the producer send a heartbeat record (the delivered LSN).
- `WATERMARK_PREFIX`: an incremental snapshot chunk's low (non-transactional) and high
  (transactional) DBLog watermarks (connector/snapshot/incremental/window.py). The value is written
  into the WAL: changing it would orphan the marks of a running snapshot across an upgrade.
"""

HEARTBEAT_PREFIX = "pgcdc.heartbeat"
WATERMARK_PREFIX = "pgcdc.snapshot"
