//! DescribeCluster (KIP-700) on the Kafka front: the cluster id, the broker clients send
//! metadata changes to (this one, as Metadata answers), and the brokers at their advertised
//! Kafka addresses — fenced ones too when v2's `include_fenced_brokers` asks, marked fenced.
//! Only broker endpoints (type 1) are described: spool's controllers run inside the brokers and
//! have no client-facing listener, so asking for controller endpoints is INVALID_REQUEST.

use std::rc::Rc;

use kafka_protocol::messages::{
    describe_cluster_response, BrokerId, DescribeClusterRequest, DescribeClusterResponse,
};
use spool_protocol::ErrorCode;

use super::kstr;
use crate::shard::Shard;

/// KIP-919's endpoint type for brokers (2 would be controllers).
const BROKER_ENDPOINTS: i8 = 1;

pub fn describe_cluster(
    shard: &Rc<Shard>,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let resp = DescribeClusterResponse::default()
        .with_endpoint_type(BROKER_ENDPOINTS)
        .with_cluster_id(kstr(shard.cluster_id().unwrap_or_default()))
        .with_controller_id(BrokerId(shard.config.node_id))
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            super::admin::CLUSTER_OPERATIONS
        } else {
            i32::MIN
        });
    if version >= 1 && req.endpoint_type != BROKER_ENDPOINTS {
        return resp
            .with_error_code(ErrorCode::InvalidRequest as i16)
            .with_error_message(Some(kstr(format!(
                "endpoint type {} is not served: spool describes broker endpoints (1) only",
                req.endpoint_type
            ))));
    }
    let live = shard.brokers("kafka");
    let mut brokers: Vec<describe_cluster_response::DescribeClusterBroker> = live
        .iter()
        .map(|b| {
            describe_cluster_response::DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(kstr(b.host.clone()))
                .with_port(i32::from(b.port))
                .with_rack(b.rack.clone().map(kstr))
        })
        .collect();
    if version >= 2 && req.include_fenced_brokers {
        let image = shard.image.borrow();
        for b in image.brokers().filter(|b| b.fenced) {
            if live.iter().any(|l| l.node_id == b.broker_id) {
                continue;
            }
            let Some(l) = b.listeners.iter().find(|l| l.name == "kafka") else {
                continue;
            };
            brokers.push(
                describe_cluster_response::DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.broker_id))
                    .with_host(kstr(l.host.clone()))
                    .with_port(i32::from(l.port))
                    .with_rack(b.rack.clone().map(kstr))
                    .with_is_fenced(true),
            );
        }
        brokers.sort_by_key(|b| b.broker_id.0);
    }
    resp.with_brokers(brokers)
}
