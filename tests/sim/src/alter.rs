//! The controller's AlterPartition: a leader's ISR change, validated against the image and
//! turned into a `PartitionChange` record.
//!
//! spool-raft has no production function for this yet (the broker does not replicate), so this
//! is the smallest one: the image mapped to spool-core's views, spool-core's
//! [`validate_alter_partition`] deciding, and spool-raft's [`records::partition_change`]
//! writing the result (leader unchanged, the new ISR, the epochs). Production must grow the same
//! function next to `failover.rs` when the broker's replication lands.
//!
//! Owns: [`alter_partition_record`].
//! Promises: pure; a refusal writes nothing; `Ok(None)` when the ISR already is the requested
//! one (answer the current state).
//! Never does: propose, or decide anything itself.

use std::collections::BTreeMap;

use spool_core::election::PartitionView;
use spool_core::isr_change::{
    validate_alter_partition, AlterPartitionError, AlterPartitionRequest, BrokerStatus,
};
use spool_core::topic_config::TopicDefaults;
use spool_protocol::metadata_records::MetadataRecordT;
use spool_raft::image::LEADER_UNCHANGED;
use spool_raft::{records, MetadataImage};

use crate::metaview::{broker_status, PartKey};

pub fn alter_partition_record(
    image: &MetadataImage,
    key: PartKey,
    request: &AlterPartitionRequest,
) -> Result<Option<MetadataRecordT>, AlterPartitionError> {
    let topic = image
        .topic_by_id(key.topic_id)
        .ok_or(AlterPartitionError::InvalidRequest)?;
    let state = usize::try_from(key.partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(AlterPartitionError::InvalidRequest)?;
    let view = PartitionView {
        replicas: state.replicas.clone(),
        isr: state.isr.clone(),
        // The metadata log has no eligible-leader field yet (spool_core::election's docs).
        eligible_leaders: Vec::new(),
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
    };
    let brokers: BTreeMap<i32, BrokerStatus> = image
        .brokers()
        .map(|b| (b.broker_id, broker_status(b)))
        .collect();
    let min_isr = topic
        .config
        .resolve(&TopicDefaults::default())
        .min_insync_replicas as usize;
    let change = validate_alter_partition(request, &view, &brokers, min_isr)?;
    Ok(change.map(|c| {
        records::partition_change(
            key.topic_id,
            key.partition,
            LEADER_UNCHANGED,
            Some(c.isr),
            None,
            c.leader_epoch,
            c.partition_epoch,
        )
    }))
}
