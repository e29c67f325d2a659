"""One topic admin request on spool's Kafka port with kafka-python 2.x, sent to one chosen node
(so a node that is not the active controller forwards it): `elect` (a preferred election of
every partition), `alter KEY VALUE` (AlterConfigs) or `grow COUNT` (CreatePartitions). Driven
by tests/tests/kafka_topic_admin.rs; prints one JSON line with the answer, then `done`."""

import argparse
import json
import sys

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterConfigsRequest, CreatePartitionsRequest, ElectLeadersRequest


def emit(event, **fields):
    print(json.dumps(dict(event=event, **fields)), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--node", type=int, required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("op", choices=["elect", "alter", "grow"])
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=20000)
    if a.op == "elect":
        # No partitions named: every partition; only those that needed an election answer.
        req = ElectLeadersRequest[1](election_type=0, topic_partitions=None, timeout=10000)
        res = admin.send_request(req, node_id=a.node)
        results = [
            [t[0], q[0], q[1]] for t in res.replication_election_results for q in t[1]
        ]
        emit("elect", error_code=res.error_code, results=results)
    elif a.op == "alter":
        key, value = a.args
        req = AlterConfigsRequest[1](resources=[(2, a.topic, [(key, value)])], validate_only=False)
        r = admin.send_request(req, node_id=a.node).resources[0]
        emit("alter", error_code=r[0], error_message=r[1])
    else:
        req = CreatePartitionsRequest[1](
            topic_partitions=[(a.topic, (int(a.args[0]), None))], timeout=10000, validate_only=False
        )
        t = admin.send_request(req, node_id=a.node).topic_errors[0]
        emit("grow", error_code=t[1], error_message=t[2])
    emit("done")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        emit("error", error=repr(e))
        sys.exit(1)
