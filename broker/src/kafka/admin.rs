//! Metadata, CreateTopics, DeleteTopics and InitProducerId on the Kafka front (DescribeConfigs
//! is `super::configs`'s, re-exported here for the API table).
//!
//! Metadata answers from this core's metadata image, with this node at the advertised Kafka
//! address (`--advertised-host`, `--advertised-kafka-port`). Requested topics that do not exist
//! are created first when `--auto-create-topics` is on and the request allows it (v4+ carries
//! `allow_auto_topic_creation`; older versions always allow it, as in Kafka), with
//! `--default-partitions` partitions, through the controller exactly like CreateTopics; otherwise
//! they are answered with UNKNOWN_TOPIC_OR_PARTITION. Metadata v0 asks for every topic with an
//! empty list; v1+ with a null one.

use std::rc::Rc;

use kafka_protocol::messages::{
    create_topics_response, delete_topics_response, metadata_response, BrokerId,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse, ProducerId,
    TopicName,
};
use spool_protocol::ErrorCode;

use super::kstr;
use crate::requests::{ControllerOp, NewTopic, TopicOutcome};
use crate::shard::Shard;

pub use super::configs::describe_configs;

/// Authorized-operation bit sets (bit n = Kafka's `AclOperation` code n) for Metadata v8+ when
/// asked: spool has no authorizer, so everything that applies is allowed, as in Kafka without
/// one. Topic: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// Cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
/// IDEMPOTENT_WRITE.
pub(super) const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

pub async fn metadata(shard: &Rc<Shard>, req: MetadataRequest, version: i16) -> MetadataResponse {
    let cfg = &shard.config;
    let names: Option<Vec<String>> = match req.topics {
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| t.name.map(|n| n.0.as_str().to_owned()))
                .collect(),
        ),
        None => None,
    };
    let topic_operations = if version >= 8 && req.include_topic_authorized_operations {
        TOPIC_OPERATIONS
    } else {
        i32::MIN
    };
    let allow_create = cfg.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
    let mut create_errors: Vec<TopicOutcome> = Vec::new();
    if let (Some(names), true) = (&names, allow_create) {
        let missing: Vec<String> = {
            let image = shard.image.borrow();
            names
                .iter()
                .filter(|n| image.topic(n).is_none())
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            let topics = missing
                .iter()
                .map(|n| NewTopic {
                    name: n.clone(),
                    partitions: cfg.default_partitions,
                    replication_factor: -1,
                    configs: Vec::new(),
                })
                .collect();
            let op = ControllerOp::CreateTopics {
                topics,
                validate_only: false,
            };
            create_errors = crate::ops::controller(shard, op, &missing)
                .await
                .into_iter()
                .filter(|o| !matches!(o.error, ErrorCode::None | ErrorCode::TopicAlreadyExists))
                .collect();
        }
    }
    let image = shard.image.borrow();
    let topic_t = |t: &spool_raft::image::TopicImage| {
        metadata_response::MetadataResponseTopic::default()
            .with_name(Some(TopicName(kstr(t.name.clone()))))
            .with_is_internal(t.name.starts_with("__"))
            .with_topic_authorized_operations(topic_operations)
            .with_partitions(
                t.partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let offline = if version >= 5 {
                            crate::local::offline_replicas(&image, &p.replicas)
                        } else {
                            Vec::new()
                        };
                        metadata_response::MetadataResponsePartition::default()
                            .with_error_code(crate::local::partition_error(p.leader) as i16)
                            .with_partition_index(i as i32)
                            .with_offline_replicas(offline.into_iter().map(BrokerId).collect())
                            .with_leader_id(BrokerId(p.leader))
                            .with_leader_epoch(p.leader_epoch)
                            .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                            .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                    })
                    .collect(),
            )
    };
    let topics = match names {
        None => image.topics().map(topic_t).collect(),
        Some(names) => names
            .iter()
            .map(|n| match image.topic(n) {
                Some(t) => topic_t(t),
                None => {
                    let error = create_errors
                        .iter()
                        .find(|o| &o.name == n)
                        .map_or(ErrorCode::UnknownTopicOrPartition, |o| o.error);
                    metadata_response::MetadataResponseTopic::default()
                        .with_error_code(error as i16)
                        .with_name(Some(TopicName(kstr(n.clone()))))
                }
            })
            .collect(),
    };
    let mut resp = MetadataResponse::default();
    if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        resp = resp.with_cluster_authorized_operations(CLUSTER_OPERATIONS);
    }
    let brokers = shard
        .brokers("kafka")
        .into_iter()
        .map(|b| {
            metadata_response::MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(kstr(b.host))
                .with_port(i32::from(b.port))
                .with_rack(b.rack.map(kstr))
        })
        .collect();
    // As in KRaft, clients are given a live broker as "the controller" (any broker forwards
    // metadata changes to the active controller): this one.
    resp.with_brokers(brokers)
        .with_cluster_id(shard.cluster_id().map(kstr))
        .with_controller_id(BrokerId(cfg.node_id))
        .with_topics(topics)
}

pub async fn create_topics(
    shard: &Rc<Shard>,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let topics: Vec<NewTopic> = req
        .topics
        .into_iter()
        .map(|t| NewTopic {
            name: t.name.0.as_str().to_owned(),
            partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            configs: t
                .configs
                .into_iter()
                .map(|c| {
                    let value = c.value.map(|v| v.as_str().to_owned()).unwrap_or_default();
                    (c.name.as_str().to_owned(), value)
                })
                .collect(),
        })
        .collect();
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let op = ControllerOp::CreateTopics {
        topics,
        validate_only: req.validate_only,
    };
    let outcomes = crate::ops::controller(shard, op, &names).await;
    let results = outcomes
        .into_iter()
        .map(|o| {
            let mut r = create_topics_response::CreatableTopicResult::default()
                .with_name(TopicName(kstr(o.name.clone())))
                .with_error_code(o.error as i16)
                .with_error_message(o.message.map(kstr));
            if version >= 5 && o.error == ErrorCode::None {
                let image = shard.image.borrow();
                if let Some(t) = image.topic(&o.name) {
                    let rf = t.partitions.first().map_or(1, |p| p.replicas.len());
                    r = r
                        .with_num_partitions(t.partitions.len() as i32)
                        .with_replication_factor(rf as i16);
                }
            }
            r
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

pub async fn delete_topics(shard: &Rc<Shard>, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names: Vec<String> = req
        .topic_names
        .iter()
        .map(|n| n.0.as_str().to_owned())
        .collect();
    let op = ControllerOp::DeleteTopics {
        names: names.clone(),
    };
    let outcomes = crate::ops::controller(shard, op, &names).await;
    DeleteTopicsResponse::default().with_responses(
        outcomes
            .into_iter()
            .map(|o| {
                delete_topics_response::DeletableTopicResult::default()
                    .with_name(Some(TopicName(kstr(o.name))))
                    .with_error_code(o.error as i16)
                    .with_error_message(o.message.map(kstr))
            })
            .collect(),
    )
}

/// InitProducerId: [`crate::handlers::txn::init_producer`]'s rule (shared with the native
/// front); an error answers producer id -1, epoch -1.
pub async fn init_producer_id(
    shard: &Rc<Shard>,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let transactional_id = req.transactional_id.as_ref().map(|t| t.0.as_str());
    // KIP-360 (v3+): the producer's current id and epoch, -1 when it has none.
    let current = (req.producer_id.0, req.producer_epoch);
    let timeout_ms = req.transaction_timeout_ms;
    match crate::handlers::txn::init_producer(shard, transactional_id, timeout_ms, current).await {
        Ok(p) => resp
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.producer_epoch),
        Err(code) => resp.with_error_code(code as i16),
    }
}
