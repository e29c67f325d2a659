#!/usr/bin/env python3
"""kafka-python 2.x against spool's Kafka port, driven by tests/tests/kafka_python.rs.

`group`: creates a topic (CreateTopics), produces keyed messages with acks=all, consumes them all
with a consumer group (enable_auto_commit=False, a synchronous commit after each poll), describes
the group while its member is in it, then asks a second client for the group's committed offsets.

`admin`: creates a topic with a config, creates it again (which must fail), describes its configs
(DescribeConfigs), lists topics, deletes it (DeleteTopics) and lists topics until it is gone.

Prints one JSON object per line on stdout ({"event": ...}); the Rust test checks them. Every wait
is bounded by --timeout-s: on expiry the script prints {"event": "timeout", ...} and exits 2.
"""

import argparse
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import TopicAlreadyExistsError

REQUEST_TIMEOUT_MS = 30_000


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("mode", choices=["group", "admin"])
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="spool-tests-python")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--timeout-s", type=float, default=90.0)
    return ap.parse_args()


def create_topic(args):
    admin = KafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="spool-tests-python-admin",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    admin.create_topics(
        [NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)],
        timeout_ms=REQUEST_TIMEOUT_MS,
    )
    emit("created", topic=args.topic, partitions=args.partitions)
    return admin


def produce(args):
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        client_id="spool-tests-python-producer",
        acks="all",
        linger_ms=5,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    sent = [
        (i, producer.send(args.topic, key=f"key-{i}".encode(), value=f"value-{i}".encode()))
        for i in range(args.messages)
    ]
    producer.flush(timeout=args.timeout_s)
    for i, future in sent:
        md = future.get(timeout=args.timeout_s)
        emit("acked", key=f"key-{i}", partition=md.partition, offset=md.offset)
    producer.close(timeout=args.timeout_s)


def consume(args, admin, deadline):
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="spool-tests-python-consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS + 5_000,
    )
    subscribed = time.monotonic()
    consumer.subscribe([args.topic])
    seen = 0
    while seen < args.messages:
        if time.monotonic() > deadline:
            emit("timeout", stage="consume", consumed=seen)
            sys.exit(2)
        polled = consumer.poll(timeout_ms=200)
        for records in polled.values():
            for r in records:
                if seen == 0:
                    emit("first_record", after_ms=round((time.monotonic() - subscribed) * 1000))
                emit(
                    "consumed",
                    key=r.key.decode(),
                    value=r.value.decode(),
                    partition=r.partition,
                    offset=r.offset,
                )
                seen += 1
        if polled:
            consumer.commit()
    emit("assignment", partitions=sorted(tp.partition for tp in consumer.assignment()))
    # While the member is still in the group: ListGroups and DescribeGroups.
    emit("groups", listed=[g[0] for g in admin.list_consumer_groups()])
    for info in admin.describe_consumer_groups([args.group]):
        emit(
            "described",
            group=info.group,
            state=info.state,
            protocol_type=info.protocol_type,
            members=len(info.members),
        )
    consumer.close()


def committed(args):
    """A fresh client of the group (it does not join): OffsetFetch per partition."""
    reader = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="spool-tests-python-offsets",
        enable_auto_commit=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS + 5_000,
    )
    for p in range(args.partitions):
        emit("committed", partition=p, offset=reader.committed(TopicPartition(args.topic, p)))
    reader.close()


def admin_round_trip(args, deadline):
    admin = KafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="spool-tests-python-admin",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    topic = NewTopic(
        args.topic,
        num_partitions=args.partitions,
        replication_factor=1,
        topic_configs={"retention.ms": "3600000"},
    )
    admin.create_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
    emit("created", topic=args.topic)
    try:
        admin.create_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
        emit("created_twice", topic=args.topic)
    except TopicAlreadyExistsError:
        emit("already_exists", topic=args.topic)
    for response in admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, args.topic)]):
        for r in response.resources:
            emit("configs", error_code=r[0], resource=r[3], entries={e[0]: e[1] for e in r[4]})
    emit("listed", topics=sorted(admin.list_topics()))
    admin.delete_topics([args.topic], timeout_ms=REQUEST_TIMEOUT_MS)
    emit("deleted", topic=args.topic)
    # Metadata may lag the deletion on another core for a moment: look until it is gone.
    while args.topic in admin.list_topics():
        if time.monotonic() > deadline:
            emit("timeout", stage="delete", topic=args.topic)
            sys.exit(2)
        time.sleep(0.05)
    emit("gone", topic=args.topic)
    admin.close()


def main():
    args = parse_args()
    deadline = time.monotonic() + args.timeout_s
    if args.mode == "admin":
        admin_round_trip(args, deadline)
    else:
        admin = create_topic(args)
        produce(args)
        consume(args, admin, deadline)
        committed(args)
        admin.close()
    emit("done")


if __name__ == "__main__":
    main()
