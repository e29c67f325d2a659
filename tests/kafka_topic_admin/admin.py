"""Topic administration on spool's Kafka port with kafka-python 2.x (driven by
tests/tests/kafka_topic_admin.rs): CreatePartitions, AlterConfigs, IncrementalAlterConfigs
(raw v0 frames: kafka-python has no client method for it), DescribeConfigs and ElectLeaders.

Prints one JSON object per line (`event` names it) and `{"event": "done"}` last."""

import argparse
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DescribeConfigsRequest,
    ElectLeadersRequest,
)
from kafka.protocol.api import Request, Response
from kafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Schema, String

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


class IncrementalAlterConfigsResponse_v0(Response):
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "responses",
            Array(
                ("error_code", Int16),
                ("error_message", String("utf-8")),
                ("resource_type", Int8),
                ("resource_name", String("utf-8")),
            ),
        ),
    )


class IncrementalAlterConfigsRequest_v0(Request):
    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
    SCHEMA = Schema(
        (
            "resources",
            Array(
                ("resource_type", Int8),
                ("resource_name", String("utf-8")),
                (
                    "configs",
                    Array(
                        ("name", String("utf-8")),
                        ("config_operation", Int8),
                        ("value", String("utf-8")),
                    ),
                ),
            ),
        ),
        ("validate_only", Boolean),
    )


def emit(event, **fields):
    print(json.dumps(dict(event=event, **fields)), flush=True)


def describe(admin, topic, key):
    req = DescribeConfigsRequest[1](
        resources=[(TOPIC_RESOURCE, topic, [key])], include_synonyms=False
    )
    res = admin.send_request(req).resources[0]
    entries = res[4]
    if not entries:
        return None
    name, value, read_only, source = entries[0][0], entries[0][1], entries[0][2], entries[0][3]
    return dict(name=name, value=value, read_only=bool(read_only), source=source)


def alter(admin, topic, configs, resource_type=TOPIC_RESOURCE):
    req = AlterConfigsRequest[1](
        resources=[(resource_type, topic, list(configs.items()))], validate_only=False
    )
    r = admin.send_request(req).resources[0]
    return dict(error_code=r[0], error_message=r[1])


def incremental(admin, topic, ops):
    req = IncrementalAlterConfigsRequest_v0(
        resources=[(TOPIC_RESOURCE, topic, ops)], validate_only=False
    )
    r = admin.send_request(req).responses[0]
    return dict(error_code=r[0], error_message=r[1])


def grow(admin, topic, count):
    req = CreatePartitionsRequest[1](
        topic_partitions=[(topic, (count, None))], timeout=10000, validate_only=False
    )
    t = admin.send_request(req).topic_errors[0]
    return dict(error_code=t[1], error_message=t[2])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--timeout-s", type=float, default=60)
    a = p.parse_args()
    deadline = time.monotonic() + a.timeout_s
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=20000)
    admin.create_topics([NewTopic(a.topic, 1, 1)])
    emit("grown", **grow(admin, a.topic, 3))
    emit("not_grown", **grow(admin, a.topic, 3))
    emit("shrunk", **grow(admin, a.topic, 2))

    # A fresh client sees three partitions, and partition 2 takes and serves records at once.
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, consumer_timeout_ms=2000)
    emit("metadata", partitions=sorted(consumer.partitions_for_topic(a.topic) or []))
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, acks="all", max_request_size=8192)
    meta = producer.send(a.topic, value=b"in-new-partition", partition=2).get(timeout=20)
    emit("produced", partition=meta.partition, offset=meta.offset)
    tp = TopicPartition(a.topic, 2)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    while not values and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            values += [r.value.decode() for r in recs]
    emit("fetched", values=values)

    # max.message.bytes acts on the live partition: a 2 KiB record is refused once it is 1000.
    emit("before", **(describe(admin, a.topic, "max.message.bytes") or {}))
    emit("altered", **alter(admin, a.topic, {"max.message.bytes": "1000"}))
    emit("after", **(describe(admin, a.topic, "max.message.bytes") or {}))
    try:
        producer.send(a.topic, value=b"x" * 2048, partition=0).get(timeout=20)
        emit("big_record", refused=False, error=None)
    except Exception as e:  # kafka-python raises MessageSizeTooLargeError (code 10)
        emit("big_record", refused=True, error=type(e).__name__)
    emit("bad_value", **alter(admin, a.topic, {"retention.ms": "soon"}))
    emit("broker_resource", **alter(admin, "0", {"retention.ms": "1"}, BROKER_RESOURCE))
    # DELETE (op 1): back to the default.
    emit("deleted", **incremental(admin, a.topic, [("max.message.bytes", 1, None)]))
    emit("after_delete", **(describe(admin, a.topic, "max.message.bytes") or {}))
    meta = producer.send(a.topic, value=b"x" * 2048, partition=0).get(timeout=20)
    emit("big_record_again", offset=meta.offset)
    emit("appended", **incremental(admin, a.topic, [("cleanup.policy", 2, "compact")]))
    emit("after_append", **(describe(admin, a.topic, "cleanup.policy") or {}))
    emit("append_refused", **incremental(admin, a.topic, [("retention.ms", 2, "5")]))

    # Preferred election on one node: every partition is led by its preferred replica.
    req = ElectLeadersRequest[1](
        election_type=0, topic_partitions=[(a.topic, [0, 1, 2])], timeout=10000
    )
    res = admin.send_request(req)
    emit(
        "elected",
        error_code=res.error_code,
        results=[[p[0], p[1]] for t in res.replication_election_results for p in t[1]],
    )
    emit("done")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        emit("error", error=repr(e))
        sys.exit(1)
