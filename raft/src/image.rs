//! [`MetadataImage`]: the cluster metadata that the controller's committed records build up —
//! brokers, topics with their partitions and configs, and the producer-id allocator.
//!
//! Owns: the in-memory state and the one function that changes it, [`MetadataImage::apply`].
//! Promises: `apply` is pure and deterministic (no I/O, no clock, no randomness), so every core and
//! every replica that applies the same records in the same order holds an equal image; it never
//! panics on any record, and a record that does not fit the image (unknown broker, stale epoch,
//! duplicate topic, …) changes nothing and returns the Kafka error code that says why.
//! Never does: decide what *should* be written — that is [`crate::validate`], which turns client
//! requests into records against an image; this file only applies records already chosen.

use std::collections::BTreeMap;

use spool_core::election::PartitionView;
use spool_core::topic_config::TopicConfig;
use spool_protocol::metadata_records::{
    AddPartitionsT, BrokerHeartbeatT, CreateTopicT, DeleteTopicT, FenceBrokerT,
    MetadataRecordBodyT, MetadataRecordT, PartitionAssignmentT, PartitionChangeT, ProducerIdBlockT,
    RegisterBrokerT, SetTopicConfigsT, TopicConfigT, UnfenceBrokerT,
};
use spool_protocol::ErrorCode;

// Re-exported so `image::Uuid128` keeps naming the type that now lives below image and records.
pub use crate::uuid128::Uuid128;

/// `PartitionChange.leader` meaning "leave the leader as it is" (schemas/metadata.fbs).
pub const LEADER_UNCHANGED: i32 = -2;
/// A partition leader meaning "no leader".
pub const NO_LEADER: i32 = -1;

/// A topic's id. Zero is never a valid topic id.
pub type TopicId = Uuid128;

/// One listener a broker advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerListener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The last heartbeat that was written to the log (only state-changing heartbeats are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatMark {
    pub broker_epoch: i64,
    pub current_metadata_offset: i64,
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    pub incarnation_id: Option<Uuid128>,
    pub broker_epoch: i64,
    pub listeners: Vec<BrokerListener>,
    pub rack: Option<String>,
    /// A fenced broker leads nothing and is not chosen for new replicas.
    pub fenced: bool,
    pub last_heartbeat: Option<HeartbeatMark>,
    pub in_controlled_shutdown: bool,
    /// Its latest registration followed an unclean shutdown (KIP-966).
    pub unclean_shutdown: bool,
}

/// One partition's replica set and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// KIP-966's eligible leader replicas (`spool_core::election`): replicas outside the ISR
    /// that hold every committed record, so one may lead when no ISR member can.
    pub eligible_leaders: Vec<i32>,
    /// The leader's broker id, or [`NO_LEADER`].
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

impl PartitionState {
    /// The partition as spool-core's election and ISR rules see it.
    pub fn view(&self) -> PartitionView {
        PartitionView {
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            eligible_leaders: self.eligible_leaders.clone(),
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        }
    }
}

/// One topic. `configs` holds only what was set explicitly, under Kafka's names (as the log
/// carries them, for DescribeConfigs and snapshots); `config` is the same, typed, parsed once when
/// the record was applied. The broker resolves defaults ([`TopicConfig::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: TopicId,
    pub configs: BTreeMap<String, String>,
    pub config: TopicConfig,
    /// Indexed by partition index: always dense, `0..partitions.len()`.
    pub partitions: Vec<PartitionState>,
}

impl TopicImage {
    /// An explicitly set config value, as it was written (for DescribeConfigs).
    pub fn config_value(&self, key: &str) -> Option<&str> {
        self.configs.get(key).map(String::as_str)
    }
}

/// The producer-id block handed out last; the next block starts at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub assigned_broker_id: i32,
    pub broker_epoch: i64,
    pub first_producer_id: i64,
    pub block_size: i32,
}

impl ProducerIdBlock {
    /// One past the last id of this block.
    pub fn end_producer_id(&self) -> i64 {
        self.first_producer_id
            .saturating_add(i64::from(self.block_size))
    }
}

/// The whole cluster metadata image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    brokers: BTreeMap<i32, BrokerRegistration>,
    topics: BTreeMap<String, TopicImage>,
    topic_names_by_id: BTreeMap<TopicId, String>,
    last_producer_id_block: Option<ProducerIdBlock>,
    /// Set once by the first `ClusterId` record, never changed.
    cluster_id: Option<Uuid128>,
}

impl MetadataImage {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values()
    }

    pub fn broker(&self, broker_id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&broker_id)
    }

    /// Unfenced broker ids, ascending: the brokers new replicas may go to.
    pub fn unfenced_broker_ids(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.broker_id)
            .collect()
    }

    /// Topics in name order.
    pub fn topics(&self) -> impl Iterator<Item = &TopicImage> {
        self.topics.values()
    }

    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, topic_id: TopicId) -> Option<&TopicImage> {
        self.topic_names_by_id
            .get(&topic_id)
            .and_then(|name| self.topics.get(name))
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// The cluster's id (`None` until the first active controller has written it).
    pub fn cluster_id(&self) -> Option<Uuid128> {
        self.cluster_id
    }

    pub fn last_producer_id_block(&self) -> Option<ProducerIdBlock> {
        self.last_producer_id_block
    }

    /// The first producer id of the next block to hand out.
    pub fn next_producer_id(&self) -> i64 {
        self.last_producer_id_block
            .map_or(0, |b| b.end_producer_id())
    }

    /// The largest broker epoch ever registered (brokers are never removed), 0 if none.
    pub fn max_broker_epoch(&self) -> i64 {
        self.brokers
            .values()
            .map(|b| b.broker_epoch)
            .max()
            .unwrap_or(0)
    }

    /// Applies one committed record. On `Err` the image is unchanged.
    pub fn apply(&mut self, record: &MetadataRecordT) -> Result<(), ErrorCode> {
        match &record.body {
            MetadataRecordBodyT::NONE => Err(ErrorCode::InvalidRequest),
            MetadataRecordBodyT::RegisterBroker(r) => self.apply_register_broker(r),
            MetadataRecordBodyT::BrokerHeartbeat(r) => self.apply_heartbeat(r),
            MetadataRecordBodyT::FenceBroker(r) => self.apply_fence(r),
            MetadataRecordBodyT::UnfenceBroker(r) => self.apply_unfence(r),
            MetadataRecordBodyT::CreateTopic(r) => self.apply_create_topic(r),
            MetadataRecordBodyT::DeleteTopic(r) => self.apply_delete_topic(r),
            MetadataRecordBodyT::PartitionChange(r) => self.apply_partition_change(r),
            MetadataRecordBodyT::ProducerIdBlock(r) => self.apply_producer_id_block(r),
            MetadataRecordBodyT::ClusterId(r) => {
                let id = r.id.as_ref().map(Uuid128::from).filter(|id| !id.is_zero());
                match (id, self.cluster_id) {
                    (None, _) => Err(ErrorCode::InvalidRequest),
                    (Some(id), None) => {
                        self.cluster_id = Some(id);
                        Ok(())
                    }
                    (Some(id), Some(current)) if id == current => Ok(()),
                    // A second id (a proposal that raced a leader change): the first one stays.
                    (Some(_), Some(_)) => Err(ErrorCode::InconsistentClusterId),
                }
            }
            MetadataRecordBodyT::AddPartitions(r) => self.apply_add_partitions(r),
            MetadataRecordBodyT::SetTopicConfigs(r) => self.apply_set_topic_configs(r),
            // A union member added to the schema after this build: not ours to interpret.
            _ => Err(ErrorCode::UnsupportedVersion),
        }
    }

    fn apply_register_broker(&mut self, r: &RegisterBrokerT) -> Result<(), ErrorCode> {
        if r.broker_id < 0 {
            return Err(ErrorCode::InvalidRequest);
        }
        if let Some(old) = self.brokers.get(&r.broker_id) {
            // A re-registration must carry a newer epoch, or an old record would resurrect a
            // broker's previous incarnation.
            if r.broker_epoch <= old.broker_epoch {
                return Err(ErrorCode::StaleBrokerEpoch);
            }
        }
        let listeners = r
            .listeners
            .iter()
            .flatten()
            .map(|l| BrokerListener {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
            })
            .collect();
        self.brokers.insert(
            r.broker_id,
            BrokerRegistration {
                broker_id: r.broker_id,
                incarnation_id: r.incarnation_id.as_ref().map(Uuid128::from),
                broker_epoch: r.broker_epoch,
                listeners,
                rack: r.rack.clone(),
                fenced: true,
                last_heartbeat: None,
                in_controlled_shutdown: false,
                unclean_shutdown: r.unclean_shutdown,
            },
        );
        Ok(())
    }

    fn broker_at_epoch(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<&mut BrokerRegistration, ErrorCode> {
        let broker = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(ErrorCode::BrokerNotAvailable)?;
        if broker.broker_epoch != broker_epoch {
            return Err(ErrorCode::StaleBrokerEpoch);
        }
        Ok(broker)
    }

    fn apply_heartbeat(&mut self, r: &BrokerHeartbeatT) -> Result<(), ErrorCode> {
        let broker = self.broker_at_epoch(r.broker_id, r.broker_epoch)?;
        broker.last_heartbeat = Some(HeartbeatMark {
            broker_epoch: r.broker_epoch,
            current_metadata_offset: r.current_metadata_offset,
        });
        broker.in_controlled_shutdown = r.want_shutdown;
        if r.want_fence {
            broker.fenced = true;
        }
        Ok(())
    }

    fn apply_fence(&mut self, r: &FenceBrokerT) -> Result<(), ErrorCode> {
        self.broker_at_epoch(r.broker_id, r.broker_epoch)?.fenced = true;
        Ok(())
    }

    fn apply_unfence(&mut self, r: &UnfenceBrokerT) -> Result<(), ErrorCode> {
        self.broker_at_epoch(r.broker_id, r.broker_epoch)?.fenced = false;
        Ok(())
    }

    fn apply_create_topic(&mut self, r: &CreateTopicT) -> Result<(), ErrorCode> {
        let topic_id = TopicId::from(&r.topic_id);
        if topic_id.is_zero() || r.name.is_empty() {
            return Err(ErrorCode::InvalidTopicException);
        }
        if self.topics.contains_key(&r.name) || self.topic_names_by_id.contains_key(&topic_id) {
            return Err(ErrorCode::TopicAlreadyExists);
        }
        let assignments = r.partitions.as_deref().unwrap_or_default();
        if assignments.is_empty() {
            return Err(ErrorCode::InvalidPartitions);
        }
        // Partitions must be exactly 0..n, each once, in any order.
        let partitions = dense_partitions(assignments, 0)?;
        let configs = config_map(r.configs.as_deref().unwrap_or_default());
        self.topic_names_by_id.insert(topic_id, r.name.clone());
        self.topics.insert(
            r.name.clone(),
            TopicImage {
                name: r.name.clone(),
                topic_id,
                config: TopicConfig::from_pairs(
                    configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ),
                configs,
                partitions,
            },
        );
        Ok(())
    }

    /// The topic a record names by id (UNKNOWN_TOPIC_OR_PARTITION when none has it).
    fn topic_by_id_mut(&mut self, topic_id: TopicId) -> Result<&mut TopicImage, ErrorCode> {
        let name = self
            .topic_names_by_id
            .get(&topic_id)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        self.topics
            .get_mut(name)
            .ok_or(ErrorCode::UnknownTopicOrPartition)
    }

    fn apply_add_partitions(&mut self, r: &AddPartitionsT) -> Result<(), ErrorCode> {
        let topic = self.topic_by_id_mut(TopicId::from(&r.topic_id))?;
        let assignments = r.partitions.as_deref().unwrap_or_default();
        if assignments.is_empty() {
            return Err(ErrorCode::InvalidPartitions);
        }
        // The new partitions continue the dense index range: current..current + n.
        let added = dense_partitions(assignments, topic.partitions.len())?;
        if added.iter().any(|p| p.replicas.is_empty()) {
            return Err(ErrorCode::InvalidReplicaAssignment);
        }
        topic.partitions.extend(added);
        Ok(())
    }

    fn apply_set_topic_configs(&mut self, r: &SetTopicConfigsT) -> Result<(), ErrorCode> {
        let topic = self.topic_by_id_mut(TopicId::from(&r.topic_id))?;
        let configs = config_map(r.configs.as_deref().unwrap_or_default());
        topic.config =
            TopicConfig::from_pairs(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        topic.configs = configs;
        Ok(())
    }

    fn apply_delete_topic(&mut self, r: &DeleteTopicT) -> Result<(), ErrorCode> {
        let topic_id = TopicId::from(&r.topic_id);
        match self.topics.get(&r.name) {
            Some(t) if t.topic_id == topic_id => {}
            _ => return Err(ErrorCode::UnknownTopicOrPartition),
        }
        self.topics.remove(&r.name);
        self.topic_names_by_id.remove(&topic_id);
        Ok(())
    }

    fn apply_partition_change(&mut self, r: &PartitionChangeT) -> Result<(), ErrorCode> {
        let topic_id = TopicId::from(&r.topic_id);
        let name = self
            .topic_names_by_id
            .get(&topic_id)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        let partition = self
            .topics
            .get_mut(name)
            .and_then(|t| {
                usize::try_from(r.partition_index)
                    .ok()
                    .and_then(|i| t.partitions.get_mut(i))
            })
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        if r.leader != LEADER_UNCHANGED {
            partition.leader = r.leader;
        }
        if let Some(isr) = &r.isr {
            partition.isr = isr.clone();
        }
        if let Some(replicas) = &r.replicas {
            partition.replicas = replicas.clone();
        }
        if let Some(eligible) = &r.eligible_leaders {
            partition.eligible_leaders = eligible.clone();
        }
        // Only replicas are eligible (a reassignment that drops one drops it here too).
        let replicas = &partition.replicas;
        partition.eligible_leaders.retain(|b| replicas.contains(b));
        partition.leader_epoch = r.leader_epoch;
        partition.partition_epoch = r.partition_epoch;
        Ok(())
    }

    fn apply_producer_id_block(&mut self, r: &ProducerIdBlockT) -> Result<(), ErrorCode> {
        if r.block_size <= 0 || r.first_producer_id < self.next_producer_id() {
            // Blocks only move forward: an id handed out twice would merge two producers.
            return Err(ErrorCode::InvalidRequest);
        }
        self.last_producer_id_block = Some(ProducerIdBlock {
            assigned_broker_id: r.assigned_broker_id,
            broker_epoch: r.broker_epoch,
            first_producer_id: r.first_producer_id,
            block_size: r.block_size,
        });
        Ok(())
    }
}

/// `assignments` as partition states indexed `first..first + n`, each index exactly once (in any
/// order); `INVALID_PARTITIONS` otherwise.
fn dense_partitions(
    assignments: &[PartitionAssignmentT],
    first: usize,
) -> Result<Vec<PartitionState>, ErrorCode> {
    let mut partitions: Vec<Option<PartitionState>> = vec![None; assignments.len()];
    for a in assignments {
        let slot = usize::try_from(a.partition_index)
            .ok()
            .and_then(|i| i.checked_sub(first))
            .and_then(|i| partitions.get_mut(i))
            .ok_or(ErrorCode::InvalidPartitions)?;
        if slot.is_some() {
            return Err(ErrorCode::InvalidPartitions);
        }
        *slot = Some(PartitionState {
            replicas: a.replicas.clone().unwrap_or_default(),
            isr: a.isr.clone().unwrap_or_default(),
            eligible_leaders: a.eligible_leaders.clone().unwrap_or_default(),
            leader: a.leader,
            leader_epoch: a.leader_epoch,
            partition_epoch: a.partition_epoch,
        });
    }
    // Every slot is filled: n distinct indexes, each in range.
    Ok(partitions.into_iter().flatten().collect())
}

/// The explicitly set configs of a record (entries without a value are not set).
fn config_map(configs: &[TopicConfigT]) -> BTreeMap<String, String> {
    configs
        .iter()
        .filter_map(|c| c.value.as_ref().map(|v| (c.name.clone(), v.clone())))
        .collect()
}
