"""Kafka sink: topic creation, the idempotent producer, and delivery (ack) tracking.

    tracker = AckTracker(start_lsn)                                  # acks.py
    topics = TopicCreator(kafka_settings, TopicSpec(partitions=3),  # topics.py
                          ledger=TopicLedger(kafka_settings, "<prefix>.offsets"))  # offsets.py
    sink = KafkaSink(kafka_settings, tracker, topics=topics)         # producer.py
    txn = tracker.begin(end_lsn); sink.produce(topic, key, value, txn); txn.seal()
    sink.poll(); tracker.delivered_lsn()                                 # -> flush LSN

Three delivery modes, each its own sink class chosen once by whoever builds it: `KafkaSink`
(at-least-once, every delivery reported to its ticket), `BulkSink` (a bulk load: failures
reported only, everything delivered once drained) and, in transactional.py, `TransactionalSink`
with its `TransactionalTracker` (exactly-once), behind the same produce/ticket/delivered_lsn
calls: each a `Sink`, paired with the tracker whose tickets it takes. The package takes its
settings as parameters; it does not read `connector.config`. Its modules import in one
direction: settings.py (the Kafka client settings) and acks.py first, then offsets.py (the
``<prefix>.offsets`` topic), topics.py, producer.py, transactional.py.
"""

from .acks import AckTracker, DeliveryTracker, PendingTxn, Ticket
from .offsets import TopicLedger
from .producer import BulkSink, KafkaSink, Sink
from .settings import PRODUCER_DEFAULTS, admin_config, producer_config
from .topics import TopicCreator, TopicSpec, partition_count, topic_problem

__all__ = [
    "PRODUCER_DEFAULTS",
    "AckTracker",
    "BulkSink",
    "DeliveryTracker",
    "KafkaSink",
    "PendingTxn",
    "Sink",
    "Ticket",
    "TopicCreator",
    "TopicLedger",
    "TopicSpec",
    "admin_config",
    "partition_count",
    "producer_config",
    "topic_problem",
]
