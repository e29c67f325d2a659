//! Constructors for the generated metadata record types (`schemas/metadata.fbs`).
//!
//! Owns: building `MetadataRecordT` values field by field. flatc marks its object-API structs
//! `#[non_exhaustive]`, so they cannot be written as struct literals outside spool-protocol; these
//! functions keep that noise out of the logic.
//! Never does: validate — see [`crate::validate`].

// Default-then-assign is the only way to build a `#[non_exhaustive]` struct from another crate.
#![allow(clippy::field_reassign_with_default)]

use spool_protocol::metadata_records::{
    AddPartitionsT, BrokerHeartbeatT, ClusterIdT, CreateTopicT, DeleteTopicT, FenceBrokerT,
    ListenerT, MetadataRecordBodyT, MetadataRecordT, PartitionAssignmentT, PartitionChangeT,
    ProducerIdBlockT, RegisterBrokerT, SetTopicConfigsT, TopicConfigT, UnfenceBrokerT, UuidT,
};

use crate::uuid128::Uuid128;

pub fn record(body: MetadataRecordBodyT) -> MetadataRecordT {
    let mut r = MetadataRecordT::default();
    r.body = body;
    r
}

pub fn uuid(id: Uuid128) -> UuidT {
    id.to_uuid()
}

pub fn listener(name: &str, host: &str, port: u16) -> ListenerT {
    let mut l = ListenerT::default();
    l.name = name.to_owned();
    l.host = host.to_owned();
    l.port = port;
    l
}

pub fn cluster_id(id: Uuid128) -> MetadataRecordT {
    let mut r = ClusterIdT::default();
    r.id = Some(uuid(id));
    record(MetadataRecordBodyT::ClusterId(Box::new(r)))
}

pub fn register_broker(
    broker_id: i32,
    incarnation_id: Option<Uuid128>,
    broker_epoch: i64,
    listeners: Vec<ListenerT>,
    rack: Option<String>,
) -> MetadataRecordT {
    let mut r = RegisterBrokerT::default();
    r.broker_id = broker_id;
    r.incarnation_id = incarnation_id.map(uuid);
    r.broker_epoch = broker_epoch;
    r.listeners = Some(listeners);
    r.rack = rack;
    record(MetadataRecordBodyT::RegisterBroker(Box::new(r)))
}

/// `record` (a `RegisterBroker`) marked as following an unclean shutdown, or not.
pub fn with_unclean_shutdown(mut record: MetadataRecordT, unclean: bool) -> MetadataRecordT {
    if let MetadataRecordBodyT::RegisterBroker(r) = &mut record.body {
        r.unclean_shutdown = unclean;
    }
    record
}

pub fn broker_heartbeat(
    broker_id: i32,
    broker_epoch: i64,
    current_metadata_offset: i64,
    want_fence: bool,
    want_shutdown: bool,
) -> MetadataRecordT {
    let mut r = BrokerHeartbeatT::default();
    r.broker_id = broker_id;
    r.broker_epoch = broker_epoch;
    r.current_metadata_offset = current_metadata_offset;
    r.want_fence = want_fence;
    r.want_shutdown = want_shutdown;
    record(MetadataRecordBodyT::BrokerHeartbeat(Box::new(r)))
}

pub fn fence_broker(broker_id: i32, broker_epoch: i64) -> MetadataRecordT {
    let mut r = FenceBrokerT::default();
    r.broker_id = broker_id;
    r.broker_epoch = broker_epoch;
    record(MetadataRecordBodyT::FenceBroker(Box::new(r)))
}

pub fn unfence_broker(broker_id: i32, broker_epoch: i64) -> MetadataRecordT {
    let mut r = UnfenceBrokerT::default();
    r.broker_id = broker_id;
    r.broker_epoch = broker_epoch;
    record(MetadataRecordBodyT::UnfenceBroker(Box::new(r)))
}

pub fn topic_config(name: &str, value: Option<&str>) -> TopicConfigT {
    let mut c = TopicConfigT::default();
    c.name = name.to_owned();
    c.value = value.map(str::to_owned);
    c
}

pub fn partition_assignment(
    partition_index: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    leader: i32,
    leader_epoch: i32,
    partition_epoch: i32,
) -> PartitionAssignmentT {
    let mut p = PartitionAssignmentT::default();
    p.partition_index = partition_index;
    p.replicas = Some(replicas);
    p.isr = Some(isr);
    p.leader = leader;
    p.leader_epoch = leader_epoch;
    p.partition_epoch = partition_epoch;
    p
}

pub fn create_topic(
    name: &str,
    topic_id: Uuid128,
    configs: Vec<TopicConfigT>,
    partitions: Vec<PartitionAssignmentT>,
) -> MetadataRecordT {
    let mut r = CreateTopicT::default();
    r.name = name.to_owned();
    r.topic_id = uuid(topic_id);
    r.configs = Some(configs);
    r.partitions = Some(partitions);
    record(MetadataRecordBodyT::CreateTopic(Box::new(r)))
}

pub fn delete_topic(name: &str, topic_id: Uuid128) -> MetadataRecordT {
    let mut r = DeleteTopicT::default();
    r.name = name.to_owned();
    r.topic_id = uuid(topic_id);
    record(MetadataRecordBodyT::DeleteTopic(Box::new(r)))
}

/// What one `PartitionChange` sets. `leader`: a broker id, `-1` for none, `-2` (the default) for
/// unchanged; `None` lists (the default) mean unchanged; the epochs are always written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFields {
    pub leader: i32,
    pub isr: Option<Vec<i32>>,
    pub replicas: Option<Vec<i32>>,
    pub eligible_leaders: Option<Vec<i32>>,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

impl Default for PartitionFields {
    fn default() -> Self {
        PartitionFields {
            leader: crate::image::LEADER_UNCHANGED,
            isr: None,
            replicas: None,
            eligible_leaders: None,
            leader_epoch: 0,
            partition_epoch: 0,
        }
    }
}

pub fn partition_change(
    topic_id: Uuid128,
    partition_index: i32,
    fields: PartitionFields,
) -> MetadataRecordT {
    let mut r = PartitionChangeT::default();
    r.topic_id = uuid(topic_id);
    r.partition_index = partition_index;
    r.leader = fields.leader;
    r.isr = fields.isr;
    r.replicas = fields.replicas;
    r.eligible_leaders = fields.eligible_leaders;
    r.leader_epoch = fields.leader_epoch;
    r.partition_epoch = fields.partition_epoch;
    record(MetadataRecordBodyT::PartitionChange(Box::new(r)))
}

pub fn producer_id_block(
    assigned_broker_id: i32,
    broker_epoch: i64,
    first_producer_id: i64,
    block_size: i32,
) -> MetadataRecordT {
    let mut r = ProducerIdBlockT::default();
    r.assigned_broker_id = assigned_broker_id;
    r.broker_epoch = broker_epoch;
    r.first_producer_id = first_producer_id;
    r.block_size = block_size;
    record(MetadataRecordBodyT::ProducerIdBlock(Box::new(r)))
}

/// New partitions for an existing topic (their indexes follow the topic's current count).
pub fn add_partitions(topic_id: Uuid128, partitions: Vec<PartitionAssignmentT>) -> MetadataRecordT {
    let mut r = AddPartitionsT::default();
    r.topic_id = uuid(topic_id);
    r.partitions = Some(partitions);
    record(MetadataRecordBodyT::AddPartitions(Box::new(r)))
}

/// A topic's whole resulting set of explicitly set configs.
pub fn set_topic_configs(topic_id: Uuid128, configs: Vec<TopicConfigT>) -> MetadataRecordT {
    let mut r = SetTopicConfigsT::default();
    r.topic_id = uuid(topic_id);
    r.configs = Some(configs);
    record(MetadataRecordBodyT::SetTopicConfigs(Box::new(r)))
}
