"""The prefixes of pgcdc's own logical decoding messages, in one place: the stream's reader
(connector/publisher.py) tells them from users' messages, their writers emit them.

- `HEARTBEAT_PREFIX`: `Pipeline._heartbeat`'s transactional message; never published as a
  message, it makes the producer send a heartbeat record (the delivered LSN, and the slot's
  restart_lsn the message carries as text: `heartbeat_restart_lsn`).
- `WATERMARK_PREFIX`: an incremental snapshot chunk's low (non-transactional) and high
  (transactional) DBLog watermarks (connector/snapshot/incremental/window.py). The value is written
  into the WAL: changing it would orphan the marks of a running snapshot across an upgrade.
- `DETACH_PREFIX`: the keys of a partition DETACHed from a root published through it, written
  by the ``detach_deletes`` event trigger (connector/replication/detach_trigger.py) in the
  DETACH's transaction; never published as a message, the producer turns them into deletes on
  the root's topic (or drops them when the option is off). Written into the WAL: keep it.
- `DROP_PREFIX`: a published table dropped upstream (its names, relation id, the slot it is
  for), written by the table watcher through the admin connection
  (connector/replication/drops.py); never published as a message, the producer turns it into
  a drop event on the table's topic. Written into the WAL: keep it.
- `ROWS_PREFIX`: the rows a CREATE TABLE AS / SELECT INTO wrote before the ``table_trigger``
  event trigger added its table to the publication, written by that trigger in the creating
  transaction (connector/replication/table_trigger.py); never published as a message, the
  producer of that publication feeds them to the assembler as the table's inserts. Written into
  the WAL: keep it.
"""

from connector.pgoutput.lsn import str_to_lsn

HEARTBEAT_PREFIX = "pgcdc.heartbeat"
WATERMARK_PREFIX = "pgcdc.snapshot"
DETACH_PREFIX = "pgcdc.detach"
DROP_PREFIX = "pgcdc.drop"
ROWS_PREFIX = "pgcdc.rows"


def heartbeat_restart_lsn(content: bytes) -> int | None:
    """The slot's restart_lsn a heartbeat message carries ("X/Y"); None when it carries none
    (empty: written before it was carried, or the slot was not found) or something else (a
    heartbeat says nothing rather than stop the producer)."""
    try:
        return str_to_lsn(content.decode("ascii"))
    except ValueError:  # UnicodeDecodeError is one
        return None
