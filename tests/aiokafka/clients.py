#!/usr/bin/env python3
"""aiokafka (asyncio, an independent Kafka client family) against spool's Kafka port, driven by
tests/tests/kafka_aiokafka.rs (issue 17, item 5).

`group`: creates a topic, produces keyed gzip-compressed messages with acks=all, consumes them
with a group of two members that share the partitions (each commits after each batch), stops
both, produces more, and has a fresh member of the same group read from the committed offsets.

`times`: creates a one-partition topic, produces records with explicit timestamps T0 + 1000 * i,
and asks `offsets_for_times` for T0 + 3500 (the answer must be offset 4 with the record's own
timestamp T0 + 4000), for T0 (offset 0) and for a time past the last record (no answer).

`admin`: an operator's round trip with AIOKafkaAdminClient: create a topic, create_partitions to
--partitions + 2 (and the same count again, refused), alter_configs retention.ms (and a bad
value, refused), describe_configs, delete_records before offset 4 of partition 0 after producing
10 records there, then delete_topics.

Prints one JSON object per line on stdout ({"event": ...}); the Rust test checks them. Every wait
is bounded by --timeout-s: on expiry the script prints {"event": "timeout", ...} and exits 2.
"""

import argparse
import asyncio
import json
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import IllegalStateError, KafkaError

REQUEST_TIMEOUT_MS = 30_000


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("mode", choices=["group", "times", "admin"])
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="spool-tests-aiokafka")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--messages", type=int, default=400)
    ap.add_argument("--timeout-s", type=float, default=90.0)
    return ap.parse_args()


class Timeout(Exception):
    pass


def left(deadline):
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Timeout()
    return remaining


async def create_topic(args, partitions):
    admin = AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS
    )
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(args.topic, num_partitions=partitions, replication_factor=1)]
        )
    finally:
        await admin.close()
    emit("created", topic=args.topic, partitions=partitions)


async def produce(args, first, count, **send_args):
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap,
        acks="all",
        compression_type="gzip",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    await producer.start()
    try:
        for i in range(first, first + count):
            md = await producer.send_and_wait(
                args.topic,
                key=f"key-{i % 17}".encode(),
                value=f"value-{i}".encode(),
                **{k: v(i) for k, v in send_args.items()},
            )
            emit("acked", seq=i, partition=md.partition, offset=md.offset)
    finally:
        await producer.stop()


def consumer(args):
    return AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


async def read_until(members, want, deadline):
    """Reads with every member until `want` records arrived in all; commits after each batch.
    Returns {member index: [(partition, offset, value)]}."""
    got = {i: [] for i in range(len(members))}
    while sum(len(v) for v in got.values()) < want:
        left(deadline)
        for i, c in enumerate(members):
            batch = await c.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for r in records:
                    got[i].append((tp.partition, r.offset, r.value.decode()))
            if batch:
                await c.commit()
    return got


async def group_mode(args, deadline):
    await create_topic(args, args.partitions)
    await produce(args, 0, args.messages)
    a, b = consumer(args), consumer(args)
    await a.start()
    await b.start()
    try:
        # Both members must hold partitions, between them every partition once (the rebalance
        # that the second member's join starts has settled), before the reading counts as
        # shared.
        def settled():
            pa = {tp.partition for tp in a.assignment()}
            pb = {tp.partition for tp in b.assignment()}
            return pa and pb and not (pa & pb) and len(pa | pb) == args.partitions

        while not settled():
            left(deadline)
            await asyncio.gather(a.getmany(timeout_ms=100), b.getmany(timeout_ms=100))
        # Reading starts over from the committed offsets (none yet: earliest), so what was
        # fetched above before it is read again below. A partition taken away meanwhile (a
        # late rebalance) is not sought: its new owner starts from the committed offset anyway.
        for c in (a, b):
            for tp in list(c.assignment()):
                committed = (await c.committed(tp)) or 0
                try:
                    c.seek(tp, committed)
                except IllegalStateError:
                    pass
        emit(
            "assigned",
            a=sorted(tp.partition for tp in a.assignment()),
            b=sorted(tp.partition for tp in b.assignment()),
        )
        got = await read_until([a, b], args.messages, deadline)
        for i, records in got.items():
            for partition, offset, value in records:
                emit("read", member=i, partition=partition, offset=offset, value=value)
    finally:
        await a.stop()
        await b.stop()
    emit("first_members_stopped")
    more = args.messages // 4
    await produce(args, args.messages, more)
    c = consumer(args)
    await c.start()
    try:
        got = await read_until([c], more, deadline)
        for partition, offset, value in got[0]:
            emit("resumed_read", partition=partition, offset=offset, value=value)
    finally:
        await c.stop()


async def times_mode(args, deadline):
    await create_topic(args, 1)
    t0 = (int(time.time()) - 3600) * 1000
    await produce(args, 0, 10, timestamp_ms=lambda i: t0 + 1000 * i)
    c = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await c.start()
    try:
        tp = TopicPartition(args.topic, 0)
        for ask in (t0 + 3500, t0, t0 + 60_000):
            left(deadline)
            found = (await c.offsets_for_times({tp: ask}))[tp]
            emit(
                "offset_for_time",
                asked=ask - t0,
                offset=None if found is None else found.offset,
                timestamp=None if found is None else found.timestamp - t0,
            )
    finally:
        await c.stop()


def error_code(e):
    """Kafka's error code of an aiokafka error (None when it carries none)."""
    return getattr(e, "errno", None)


def resources(responses):
    """Every (error_code, resource_name, object) of AlterConfigs / DescribeConfigs answers."""
    for r in responses:
        for res in r.to_object()["resources"]:
            yield res


async def admin_mode(args, deadline):
    await create_topic(args, args.partitions)
    admin = AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS
    )
    await admin.start()
    try:
        wanted = args.partitions + 2
        await admin.create_partitions({args.topic: NewPartitions(total_count=wanted)})
        described = await admin.describe_topics([args.topic])
        emit("partitions_added", count=len(described[0]["partitions"]))
        refused = None
        try:
            await admin.create_partitions({args.topic: NewPartitions(total_count=wanted)})
        except KafkaError as e:
            refused = error_code(e)
        emit("partitions_not_grown", error_code=refused)

        topic = ConfigResourceType.TOPIC
        altered = await admin.alter_configs(
            [ConfigResource(topic, args.topic, configs={"retention.ms": "3600000"})]
        )
        bad = await admin.alter_configs(
            [ConfigResource(topic, args.topic, configs={"retention.ms": "soon"})]
        )
        got = await admin.describe_configs([ConfigResource(topic, args.topic)])
        entries = [e for r in resources(got) for e in r["config_entries"]]
        retention = next(e for e in entries if e["config_names"] == "retention.ms")
        emit(
            "config_altered",
            error_codes=[r["error_code"] for r in resources(altered)],
            bad_value_error_codes=[r["error_code"] for r in resources(bad)],
            value=retention["config_value"],
            read_only=retention["read_only"],
        )

        left(deadline)
        p = AIOKafkaProducer(bootstrap_servers=args.bootstrap, acks="all")
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(args.topic, f"r-{i}".encode(), partition=0)
        finally:
            await p.stop()
        tp = TopicPartition(args.topic, 0)
        low = await admin.delete_records({tp: RecordsToDelete(before_offset=4)})
        emit("records_deleted", low=low[tp])
        c = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
        await c.start()
        try:
            first = (await c.beginning_offsets([tp]))[tp]
        finally:
            await c.stop()
        emit("beginning", offset=first)
        await admin.delete_topics([args.topic])
        emit("deleted")
    finally:
        await admin.close()


async def main():
    args = parse_args()
    deadline = time.monotonic() + args.timeout_s
    try:
        run = {"group": group_mode, "times": times_mode, "admin": admin_mode}[args.mode]
        await asyncio.wait_for(run(args, deadline), timeout=args.timeout_s)
    except (Timeout, asyncio.TimeoutError):
        emit("timeout", mode=args.mode, after_s=args.timeout_s)
        sys.exit(2)
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
