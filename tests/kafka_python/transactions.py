#!/usr/bin/env python3
"""kafka-python 2.x transactions against spool's Kafka port, driven by tests/tests/transactions.rs.

Modes:
- `basic`: over a topic of --partitions partitions, a committed transaction, an aborted one
  (flushed first, so its records reach the log) and a second committed one; then two producers
  with one transactional id: the second fences the first, whose commit must fail. Reads the
  topic back with read_committed and read_uncommitted and prints every value each saw.
- `hang`: opens a transaction (transaction.timeout.ms = --txn-timeout-ms), writes --messages
  records, flushes, prints `sent` and waits to be killed.
- `stable`: waits until every partition's read_committed end (the LSO) equals its
  read_uncommitted end (the high watermark), then reads with read_committed.
- `seed`: writes --messages records (values 0..n-1) to --topic with an idempotent producer.
- `process`: consume-transform-produce from --topic to --out in transactions with
  send_offsets_to_transaction (group --group, transactional id --txn-id), until the group's
  committed offsets cover --messages input records; prints `committed` per transaction.
- `read`: prints every value of --topic read with read_committed.

TXN_DEBUG=1 in the environment prints kafka-python's own trace on stderr.

Prints one JSON object per line on stdout ({"event": ...}); the Rust test checks them. Every wait
is bounded by --timeout-s: on expiry the script prints {"event": "timeout", ...} and exits 2.
"""

import argparse
import json
import logging
import os
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

REQUEST_TIMEOUT_MS = 30_000


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "mode",
        choices=["basic", "hang", "stable", "seed", "process", "read"],
    )
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--group", default="spool-tests-txn")
    ap.add_argument("--txn-id", default="spool-tests-txn")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication", type=int, default=3)
    ap.add_argument("--messages", type=int, default=30)
    ap.add_argument("--txn-timeout-ms", type=int, default=60_000)
    ap.add_argument("--timeout-s", type=float, default=90.0)
    return ap.parse_args()


class Deadline:
    def __init__(self, seconds, what):
        self.at = time.monotonic() + seconds
        self.what = what

    def check(self, **fields):
        if time.monotonic() > self.at:
            emit("timeout", what=self.what, **fields)
            sys.exit(2)


def create_topics(args, names):
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    for name in names:
        try:
            admin.create_topics(
                [NewTopic(name, num_partitions=args.partitions, replication_factor=args.replication)],
                timeout_ms=REQUEST_TIMEOUT_MS,
            )
        except TopicAlreadyExistsError:
            pass
    admin.close()


def txn_producer(args, txn_id=None, **extra):
    p = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        transactional_id=txn_id or args.txn_id,
        transaction_timeout_ms=args.txn_timeout_ms,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **extra,
    )
    p.init_transactions()
    return p


def read_values(args, topic, isolation):
    """Every value of `topic` from the start to its end (as `isolation` sees the end)."""
    c = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    parts = [TopicPartition(topic, p) for p in c.partitions_for_topic(topic) or []]
    c.assign(parts)
    c.seek_to_beginning(*parts)
    ends = c.end_offsets(parts)
    values = []
    deadline = Deadline(args.timeout_s, f"reading {topic} ({isolation})")
    while any(c.position(tp) < ends[tp] for tp in parts):
        deadline.check(positions={str(tp): c.position(tp) for tp in parts})
        for _, records in c.poll(timeout_ms=500).items():
            values.extend(r.value.decode() for r in records)
        # Aborted records and markers are skipped, so a position can jump past them.
    c.close()
    return values


def basic(args):
    create_topics(args, [args.topic])
    p = txn_producer(args)
    for name, commit in [("c", True), ("a", False), ("d", True)]:
        p.begin_transaction()
        for i in range(args.messages):
            p.send(args.topic, value=f"{name}{i}".encode(), partition=i % args.partitions)
        if commit:
            p.commit_transaction()
        else:
            p.flush()
            p.abort_transaction()
        emit("ended", name=name, commit=commit)
    p.close()
    # Fencing: a second instance of one transactional id aborts the first's open transaction.
    first = txn_producer(args, txn_id=args.txn_id + "-fenced")
    first.begin_transaction()
    first.send(args.topic, value=b"zombie", partition=0)
    first.flush()
    second = txn_producer(args, txn_id=args.txn_id + "-fenced")
    try:
        first.commit_transaction()
        emit("zombie_committed")
    except Exception as e:  # noqa: BLE001 - any refusal is what is asserted
        emit("zombie_refused", error=type(e).__name__, message=str(e))
    second.begin_transaction()
    second.send(args.topic, value=b"successor", partition=0)
    second.commit_transaction()
    second.close()
    for isolation in ["read_committed", "read_uncommitted"]:
        emit("read", isolation=isolation, values=read_values(args, args.topic, isolation))


def hang(args):
    create_topics(args, [args.topic])
    p = txn_producer(args)
    p.begin_transaction()
    for i in range(args.messages):
        p.send(args.topic, value=f"h{i}".encode(), partition=i % args.partitions)
    p.flush()
    # While the transaction is open its partitions' LSO stays at its first record.
    committed = KafkaConsumer(bootstrap_servers=args.bootstrap, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=args.bootstrap)
    parts = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    lso, hw = committed.end_offsets(parts), uncommitted.end_offsets(parts)
    emit(
        "sent",
        messages=args.messages,
        lso={str(tp.partition): lso[tp] for tp in parts},
        hw={str(tp.partition): hw[tp] for tp in parts},
    )
    deadline = Deadline(args.timeout_s, "waiting to be killed")
    while True:
        deadline.check()
        time.sleep(0.2)


def stable(args):
    deadline = Deadline(args.timeout_s, "the LSO reaching the high watermark")
    committed = KafkaConsumer(bootstrap_servers=args.bootstrap, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=args.bootstrap)
    parts = [TopicPartition(args.topic, p) for p in committed.partitions_for_topic(args.topic)]
    while True:
        lso = committed.end_offsets(parts)
        hw = uncommitted.end_offsets(parts)
        if all(lso[tp] == hw[tp] for tp in parts):
            emit("stable", hw={str(tp.partition): hw[tp] for tp in parts})
            break
        deadline.check(lso={str(tp.partition): lso[tp] for tp in parts})
        time.sleep(0.2)
    emit("read", isolation="read_committed", values=read_values(args, args.topic, "read_committed"))


def seed(args):
    create_topics(args, [args.topic, args.out] if args.out else [args.topic])
    p = KafkaProducer(bootstrap_servers=args.bootstrap, enable_idempotence=True, acks="all")
    for i in range(args.messages):
        p.send(args.topic, value=str(i).encode(), partition=i % args.partitions)
    p.flush()
    emit("seeded", messages=args.messages)


def committed_total(consumer, parts):
    total = 0
    for tp in parts:
        total += consumer.committed(tp) or 0
    return total


def process(args):
    consumer = KafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    producer = txn_producer(args)
    deadline = Deadline(args.timeout_s, "processing every input record")
    parts = None
    while True:
        deadline.check()
        batches = consumer.poll(timeout_ms=500, max_records=7)
        if not batches:
            parts = parts or [TopicPartition(args.topic, p) for p in range(args.partitions)]
            if committed_total(consumer, parts) >= args.messages:
                break
            continue
        producer.begin_transaction()
        offsets = {}
        n = 0
        for tp, records in batches.items():
            for r in records:
                producer.send(args.out, value=r.value + b"!", partition=tp.partition)
                n += 1
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        producer.send_offsets_to_transaction(offsets, args.group)
        producer.commit_transaction()
        emit("committed", records=n)
    producer.close()
    consumer.close()


def main():
    if os.environ.get("TXN_DEBUG"):
        # kafka-python's own trace on stderr (the tests keep stdout for events).
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    args = parse_args()
    {
        "basic": basic,
        "hang": hang,
        "stable": stable,
        "seed": seed,
        "process": process,
        "read": lambda a: emit("read", isolation="read_committed", values=read_values(a, a.topic, "read_committed")),
    }[args.mode](args)
    emit("done")


if __name__ == "__main__":
    main()
